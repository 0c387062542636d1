"""The layers of docs/architecture.md hold: checked by import-linter's contracts (pyproject.toml), and a command
starts without loading Ray, DuckDB, numpy, onnxruntime or pydantic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("ray", "duckdb", "numpy", "onnxruntime", "pydantic", "pyarrow", "fastapi", "httpx")


def test_domain_api_and_interfaces_keep_to_their_layers():
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "Contracts: 7 kept, 0 broken." in out.stdout


def test_a_command_starts_without_ray_duckdb_numpy_or_pydantic():
    code = ("import sys; from engram.cli.main import build_parser; build_parser(); import engram.client; "
            "import engram.server.instance; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""

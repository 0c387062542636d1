"""Running the `engram` command as a user would: a separate process, its output and exit code."""

import os
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "engram" / "samples" / "acme-dashboard.jsonl"


def engram(home: Path, *args: str, timeout: float = 180, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "ENGRAM_HOME": str(home), **(env or {})}
    full_env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, "-m", "engram", *args],
        capture_output=True, text=True, timeout=timeout, env=full_env,
    )

"""clients/typescript's own tests (node --test) against a live `engram serve` (its own process, in-process
runtime): a key scoped to `ts-ada`, and another agent, `ts-bob`, that the key may not see.

`make test` installs the client's npm packages (npm ci, from its lockfile); this test builds it offline (its types
generated from this engram's OpenAPI document, then tsc) and runs its tests under Node. Nothing is fetched here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.server

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def openapi_document() -> str:
    from engram.server.app import create_app

    return json.dumps(create_app(None, None).openapi(), indent=1)


def npm(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["npm", *args], cwd=CLIENT, env={**os.environ, "npm_config_offline": "true", **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(shutil.which("node") is None or not (CLIENT / "node_modules").exists(),
                    reason="the client's npm packages are installed by `make test` (npm ci in clients/typescript)")
def test_the_typescript_client_passes_its_tests_against_a_live_server(tmp_path):
    from engram.api.types import Message
    from engram.client import Client
    from engram.server.keys import add_key
    from tests.server.helpers import ServerProcess

    (CLIENT / "openapi.json").write_text(openapi_document())
    built = npm("run", "build")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    home = tmp_path / "home"
    home.mkdir()
    key, _ = add_key(home, ("ts-ada",))
    admin, _ = add_key(home, ("*",))
    with ServerProcess(home) as server:
        with Client(server.url, api_key=admin) as mem:
            mem.append_messages("ts-bob", "bob-talk", [Message(role="user", content="ts-bob's locker code is 4711")])
        ran = npm("test", env={"ENGRAM_URL": server.url, "ENGRAM_API_KEY": key})
    out = ran.stdout + ran.stderr
    failed = [block for block in out.split("# Subtest: ") if "not ok" in block]
    assert ran.returncode == 0, "\n".join(block[:1500] for block in failed) or out[-6000:]
    assert "# fail 0" in out and "# pass " in out, out[-3000:]
    assert key not in out

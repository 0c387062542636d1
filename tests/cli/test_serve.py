"""`engram serve` keeps the actors; other commands reach the running instance instead of the files."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.cli.helpers import SAMPLE, engram

pytestmark = pytest.mark.ray


def test_commands_reach_a_running_instance(home_dir):
    env = {**os.environ, "ENGRAM_HOME": str(home_dir)}
    env.pop("RAY_ADDRESS", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "engram", "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (home_dir / "instance.json").exists():
            assert server.poll() is None, server.stderr.read()
            assert time.monotonic() < deadline, "engram serve did not come up"
            time.sleep(0.2)
        ing = engram(home_dir, "ingest", str(SAMPLE))
        assert ing.returncode == 0, ing.stderr
        # The log file is held by the server's actor; the query goes through it.
        out = engram(home_dir, "sql", "SELECT count(*) AS n FROM messages", "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == [{"n": 45}]
        st = engram(home_dir, "status", "--json")
        assert json.loads(st.stdout)["mode"] == "running instance"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    assert not (home_dir / "instance.json").exists()
    # After a clean stop the files are readable directly again.
    out = engram(home_dir, "sql", "SELECT count(*) AS n FROM messages", "--json")
    assert json.loads(out.stdout) == [{"n": 45}]

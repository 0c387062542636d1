"""On Ray, as a user runs it: one server per home, whatever runs at once; `engram serve` in the foreground."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tests.cli.helpers import SAMPLE, engram

pytestmark = [pytest.mark.ray, pytest.mark.server]


def ray_instances(home) -> set[str]:
    """Sessions of the home's own local Ray instance (one temp dir per home, one session per start)."""
    from engram.runtime.startup import ray_dir_for

    root = ray_dir_for(home.resolve())
    return {p.name for p in root.glob("session_2*")} if root.exists() else set()


def test_four_commands_at_once_share_one_server_and_status_answers_during_an_ingest(home_dir, tmp_path):
    before = ray_instances(home_dir)
    try:
        with ThreadPoolExecutor(4) as pool:
            ingest = pool.submit(engram, home_dir, "ingest", str(SAMPLE), "--agent", "priya", timeout=600)
            time.sleep(1.0)
            others = [pool.submit(engram, home_dir, *args, timeout=600) for args in
                      (("status", "--json"), ("sql", "SELECT 1 AS one", "--json"), ("sql", "SELECT 2 AS two", "--csv"))]
            outs = [f.result() for f in others]
            done = ingest.result()
        assert done.returncode == 0, done.stderr
        assert [o.returncode for o in outs] == [0, 0, 0], [o.stderr for o in outs]
        assert json.loads(outs[0].stdout)["mode"] == "server"
        assert json.loads(outs[1].stdout) == [{"one": 1}]
        assert "45 new message(s)" in done.stdout
        assert len(ray_instances(home_dir) - before) == 1  # one Ray instance for all four
        log = (home_dir / "logs" / "server.log").read_text()
        assert log.count("engram: serving ") == 1
        # While another ingest runs (and memory is being created), status answers at once.
        other = tmp_path / "other.jsonl"
        other.write_text("".join(json.dumps({"role": "user" if i % 2 == 0 else "assistant",
                                             "content": f"Note {i}: the Lisbon trip needs item {i} packed."}) + "\n"
                                 for i in range(120)))
        again = subprocess.Popen([sys.executable, "-m", "engram", "ingest", str(other), "--agent", "second",
                                  "--discussion", "packing"],
                                 env={**os.environ, "ENGRAM_HOME": str(home_dir)}, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        started = time.monotonic()
        status = engram(home_dir, "status")
        assert status.returncode == 0 and "shard 0: head " in status.stdout
        assert time.monotonic() - started < 30
        assert again.wait(timeout=600) == 0
    finally:
        engram(home_dir, "down")


def test_engram_serve_runs_in_the_foreground_and_stops_cleanly(home_dir):
    env = {**os.environ, "ENGRAM_HOME": str(home_dir)}
    env.pop("RAY_ADDRESS", None)
    server = subprocess.Popen([sys.executable, "-m", "engram", "serve", "--port", "0"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not (home_dir / "instance.json").exists():
            assert server.poll() is None, server.stderr.read()
            assert time.monotonic() < deadline, "engram serve did not come up"
            time.sleep(0.2)
        info = json.loads((home_dir / "instance.json").read_text())
        assert info["pid"] == server.pid and info["url"].startswith("http://127.0.0.1:")
        ing = engram(home_dir, "ingest", str(SAMPLE), "--no-wait")
        assert ing.returncode == 0, ing.stderr
        assert "starting a server" not in ing.stderr  # the foreground server is the home's server
        out = engram(home_dir, "sql", "SELECT count(*) AS n FROM messages", "--json")
        assert json.loads(out.stdout) == [{"n": 45}]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    assert f"serving {home_dir.resolve()} at {info['url']}" in server.stdout.read()
    assert not (home_dir / "instance.json").exists()


def test_a_server_started_from_a_directory_holding_an_engram_folder_runs_engrams_own_code(home_dir, tmp_path,
                                                                                         monkeypatch):
    """Issue 22: `python -m engram.boot.serve` put the working directory first on the import path, so the parent of a
    clone (which holds `engram/`) made every command fail; Ray also puts the driver's working directory on every
    worker's import path. The server here starts from such a directory, on Ray, with RAY_TMPDIR set: it must run
    engram's own modules in the server and in every actor, and keep its Ray files under RAY_TMPDIR."""
    import tempfile

    decoy = tmp_path / "projects"
    for module in ("__init__.py", "boot.py", "events/__init__.py", "policies/__init__.py"):
        (decoy / "engram" / module).parent.mkdir(parents=True, exist_ok=True)
        (decoy / "engram" / module).write_text("raise ImportError('the decoy engram package was imported')\n")
    ray_tmp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))  # short: Ray's socket paths live below it
    monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
    env = {**os.environ, "ENGRAM_HOME": str(home_dir)}
    env.pop("RAY_ADDRESS", None)
    command = str(Path(sys.executable).with_name("engram"))  # the installed entry point, as a user runs it

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([command, *args], cwd=decoy, env=env, capture_output=True, text=True, timeout=600)

    try:
        ingest = run("ingest", str(SAMPLE), "--agent", "priya")  # waits until the actors have made memory
        assert ingest.returncode == 0, ingest.stderr
        assert "45 new message(s)" in ingest.stdout
        recall = run("recall", "When is the deadline?", "--agent", "priya", "--json")
        assert recall.returncode == 0, recall.stderr
        assert json.loads(recall.stdout)["hits"]
        status = run("status", "--json")
        assert status.returncode == 0 and json.loads(status.stdout)["mode"] == "server"
        from engram.runtime.startup import ray_dir_for, temp_dir_for

        assert temp_dir_for(home_dir.resolve()).parent == ray_tmp  # RAY_TMPDIR honoured: engram's own dir in it
        assert list(ray_dir_for(home_dir.resolve()).glob("session_2*"))
        assert "decoy" not in (home_dir / "logs" / "server.log").read_text()
    finally:
        run("down")
        shutil.rmtree(ray_tmp, ignore_errors=True)

"""The home's server as the plain commands meet it: the first command starts one in the background, later ones
reuse it, an idle timeout and `engram down` stop it, a stale instance.json is replaced, racing commands start
exactly one, and everything a user can get wrong is one line on stderr with exit code 2.

Most homes here run their server on the in-process runtime (`server.runtime: "inprocess"`: same server, same
CLI, no Ray start per test); the last tests run on Ray.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from tests.cli.helpers import SAMPLE, engram

pytestmark = pytest.mark.server


def configure(home, **server) -> None:  # noqa: D103 - the lifecycle tests pick their server settings
    (home / "engram.json").write_text(json.dumps({"server": {"runtime": "inprocess", **server}}))


def instance(home) -> dict:
    return json.loads((home / "instance.json").read_text())


def alive(pid: int) -> bool:
    from engram.server.instance import pid_alive

    return pid_alive(pid)


def wait_gone(pid: int, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)


@pytest.fixture
def home(home_dir):
    configure(home_dir)
    yield home_dir
    stop(home_dir)


def stop(home) -> None:
    """Whatever server a test left running for `home` is stopped (by its pid, never by name)."""
    try:
        pid = instance(home)["pid"]
    except (OSError, ValueError, KeyError):
        return
    if pid != os.getpid() and alive(pid):
        engram(home, "down")
        if not wait_gone(pid, 30):
            os.kill(pid, 9)


def test_the_first_command_starts_a_server_and_later_commands_reuse_it(home):
    first = engram(home, "ingest", str(SAMPLE), "--agent", "priya")
    assert first.returncode == 0, first.stderr
    assert "engram: starting a server for" in first.stderr and "`engram down` stops it" in first.stderr
    assert f"logs in {home / 'logs' / 'server.log'}" in first.stderr
    info = instance(home)
    assert info["url"].startswith("http://127.0.0.1:") and alive(info["pid"]) and info["home"] == str(home)
    again = engram(home, "sql", "SELECT count(*) AS n FROM messages", "--json")
    assert again.returncode == 0 and json.loads(again.stdout) == [{"n": 45}]
    assert "starting a server" not in again.stderr  # reused
    assert instance(home)["pid"] == info["pid"]
    status = engram(home, "status", "--json")
    assert json.loads(status.stdout)["mode"] == "server"
    down = engram(home, "down")
    assert down.returncode == 0 and f"stopped the engram server of {home}" in down.stdout
    assert wait_gone(info["pid"]) and not (home / "instance.json").exists()
    assert engram(home, "down").stdout.startswith("no engram server runs for")


def test_an_idle_server_stops_by_itself(home_dir):
    configure(home_dir, idleTimeoutSeconds=2)
    out = engram(home_dir, "status")
    assert out.returncode == 0, out.stderr
    pid = instance(home_dir)["pid"]
    assert wait_gone(pid, 60), "the idle server did not stop"
    assert not (home_dir / "instance.json").exists()
    assert "idle for 2s, stopping" in (home_dir / "logs" / "server.log").read_text()


def test_a_stale_instance_file_is_replaced_never_waited_on(home):
    (home / "instance.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": 2 ** 22 + 7, "token": "x"}))
    started = time.monotonic()
    out = engram(home, "status")
    assert out.returncode == 0, out.stderr
    assert instance(home)["pid"] != 2 ** 22 + 7
    stop(home)
    # A PID reused by a process that is no engram server of this home (here: a sleeping process).
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (home / "instance.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": sleeper.pid, "token": "x"}))
        out = engram(home, "status")
        assert out.returncode == 0, out.stderr
        assert instance(home)["pid"] not in (sleeper.pid,)
    finally:
        sleeper.kill()
    assert time.monotonic() - started < 120


def test_commands_racing_to_start_the_server_start_exactly_one(home):
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda q: engram(home, "sql", q, "--json"),
                             ["SELECT 1 AS n", "SELECT 2 AS n", "SELECT 3 AS n", "SELECT 4 AS n"]))
    assert [o.returncode for o in outs] == [0, 0, 0, 0], [o.stderr for o in outs]
    assert sorted(json.loads(o.stdout)[0]["n"] for o in outs) == [1, 2, 3, 4]
    assert sum("server ready at" in o.stderr for o in outs) == 1  # one started it, three reused it
    log = (home / "logs" / "server.log").read_text()
    assert log.count("engram: serving ") == 1


def test_a_second_server_for_the_same_home_refuses_to_start(home):
    assert engram(home, "status").returncode == 0
    second = subprocess.run([sys.executable, "-m", "engram.boot", "serve", "--home", str(home)], capture_output=True,
                            text=True, timeout=120)
    assert second.returncode == 2
    assert f"{home} is already served at {instance(home)['url']}" in second.stderr


def test_what_a_user_gets_wrong_is_one_line_and_exit_2_and_starts_nothing(home):
    (home / "engram.json").write_text(json.dumps({"server": {"runtime": "inprocess", "idleTimeoutSecs": 5}}))
    out = engram(home, "status")
    assert out.returncode == 2 and "did you mean 'idleTimeoutSeconds'?" in out.stderr
    assert not (home / "instance.json").exists() and not (home / "logs").exists()  # nothing was started
    configure(home)
    for args, message in [
        (("recall", "x", "--agent", "../etc"), "agent id '../etc' contains a path separator"),
        (("ingest", str(SAMPLE), "--agent", "bad agent"), "agent id 'bad agent' contains ' '"),
        (("recall", "x", "--weight", "charm=1"), "unknown factor 'charm'"),
        (("mood", "set", "--valence", "3", "--arousal", "0", "--dominance", "0"), "--valence must be within [-1, 1]"),
        (("search", "a", "--discussion", "a/b"), "contains a path separator"),
    ]:
        res = engram(home, *args)
        assert res.returncode == 2, (args, res.stderr)
        assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "Traceback" not in res.stderr
    assert not (home / "instance.json").exists()  # rejected before any server was needed
    res = engram(home, "recall", "anything", "--agent", "nobody")  # needs the server: it starts, then refuses
    assert res.returncode == 2 and "agent 'nobody' is not known" in res.stderr.splitlines()[-1]
    assert "Traceback" not in res.stderr


def test_a_home_locked_by_another_process_is_one_clear_line_with_the_log(home):
    import duckdb

    (home / "log").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "c.execute('CREATE TABLE IF NOT EXISTS t (x INT)'); print('ready', flush=True); time.sleep(120)",
                               str(home / "log" / "shard-000.duckdb")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        res = engram(home, "status")
        assert res.returncode == 2
        line = res.stderr.strip().splitlines()[-1]
        assert "is locked by another process" in line and f"log: {home / 'logs' / 'server.log'}" in line
        assert "Traceback" not in res.stderr
    finally:
        holder.kill()
    del duckdb


def test_a_missing_api_key_variable_is_one_line_before_anything_starts(home, monkeypatch):
    monkeypatch.delenv("ENGRAM_TEST_NO_SUCH_KEY", raising=False)
    (home / "engram.json").write_text(json.dumps({"server": {"runtime": "inprocess"}, "llm": {
        "provider": "anthropic", "endpoints": {"default": {"apiKeyEnv": "ENGRAM_TEST_NO_SUCH_KEY"}}}}))
    res = engram(home, "status")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    line = res.stderr.strip().splitlines()[-1]
    assert "ENGRAM_TEST_NO_SUCH_KEY is not set" in line and f"log: {home / 'logs' / 'server.log'}" in line
    assert not (home / "instance.json").exists()

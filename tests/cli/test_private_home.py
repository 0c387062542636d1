"""What another user of the machine can read of a home: nothing (issue 21, finding 6).

The home is 0700 and every file engram writes in it 0600: instance.json (the instance token), keys.json, the
DuckDB log and projections, the JSONL files, logs/server.log, job journals. The server process runs with umask
077 (engram.boot.serve), and the commands write the files they make before it runs with explicit modes. Servers here
run on the in-process runtime (no Ray); the Ray temp dir and Ray's listeners are in test_ray_processes.py.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from tests.cli.helpers import SAMPLE, engram

pytestmark = pytest.mark.server


def open_to_others(root: Path) -> list[str]:
    """Every path under `root` (itself included) that its group or others may read, write or enter."""
    found = []
    for path in [root, *root.rglob("*")]:
        mode = os.lstat(path).st_mode
        if not stat.S_ISLNK(mode) and mode & 0o077:
            found.append(f"{stat.filemode(mode)} {path.relative_to(root.parent)}")
    return found


@pytest.fixture
def home(tmp_path):
    old = os.umask(0o022)  # what a user's shell has: engram must not depend on a strict umask of its caller
    path = tmp_path / "home"  # not created: the first command makes it
    try:
        yield path
    finally:
        os.umask(old)
        from tests.cli.test_server_lifecycle import stop

        stop(path)


def test_a_home_and_everything_the_server_writes_in_it_are_private(home):
    keys = engram(home, "keys", "add", "--agents", "*")
    assert keys.returncode == 0, keys.stderr
    (home / "engram.json").write_text(json.dumps({"server": {"runtime": "inprocess"}}))
    init = engram(home, "init", "priya")
    assert init.returncode == 0, init.stderr
    key = next(word for word in (keys.stdout + keys.stderr).split() if word.startswith("ek-"))
    ingest = engram(home, "ingest", str(SAMPLE), "--agent", "priya", env={"ENGRAM_API_KEY": key})
    assert ingest.returncode == 0, ingest.stderr
    written = {p.relative_to(home).as_posix() for p in home.rglob("*") if p.is_file()}
    assert {"instance.json", "keys.json", "log/shard-000.duckdb", "projections/shard-000.duckdb",
            "logs/server.log", "agents/priya/agent.config.json"} <= written
    assert any(p.endswith("_memories.jsonl") for p in written)
    (home / "engram.json").chmod(0o600)  # the one file the test wrote itself
    assert open_to_others(home) == []


def test_a_home_an_older_engram_made_open_is_made_private_when_its_server_starts(home):
    home.mkdir(mode=0o755)
    (home / "engram.json").write_text(json.dumps({"server": {"runtime": "inprocess"}}))
    out = engram(home, "status")
    assert out.returncode == 0, out.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "instance.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((home / "logs" / "server.log").stat().st_mode) == 0o600


def test_files_written_before_any_server_are_private():
    from engram.kernel.private import private_home, write_private

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        old = os.umask(0o022)
        try:
            home = Path(tmp) / "a" / "home"
            assert private_home(home) is None  # made now: nothing to say
            write_private(home / "instance.json", "{}")
            assert stat.S_IMODE(home.stat().st_mode) == 0o700
            assert stat.S_IMODE(home.parent.stat().st_mode) == 0o700
            assert stat.S_IMODE((home / "instance.json").stat().st_mode) == 0o600
            home.chmod(0o755)
            said = private_home(home)
            assert said == f"made {home} private to its owner (it was drwxr-xr-x; now drwx------)"
            assert stat.S_IMODE(home.stat().st_mode) == 0o700
        finally:
            os.umask(old)

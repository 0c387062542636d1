"""A disk that fills up, and a read-only home: clear errors, nothing acknowledged lost, nothing half-written."""

from __future__ import annotations

import os
import subprocess

import msgspec
import pytest
from tests.reliability.crash import Ack, fill_the_disk

from engram.events.store import EventStore
from engram.shard.host import HomeNotWritable, ShardHost


def _mount_tmpfs(path, size: str) -> bool:
    """A small real filesystem (needs the right to mount, as root in a container); False where not allowed."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


@pytest.fixture(params=["tmpfs", "file-size-limit"])
def small_disk(request, tmp_path):
    """(home, file size limit or None, make room): a full tmpfs (ENOSPC), else RLIMIT_FSIZE (EFBIG) per process."""
    if request.param == "tmpfs":
        disk = tmp_path / "disk"
        if not _mount_tmpfs(disk, "4m"):
            pytest.skip("mounting a tmpfs is not allowed here; the file-size-limit variant covers a full disk")
        yield disk / "home", None, lambda: subprocess.run(["mount", "-o", "remount,size=64m", str(disk)], check=True)
        subprocess.run(["umount", "-l", str(disk)], check=False)
    else:
        yield tmp_path / "home", 3 * 1024 * 1024, lambda: None


def test_a_disk_that_fills_up_refuses_appends_clearly_and_loses_nothing_acknowledged(small_disk, tmp_path):
    home, file_limit, make_room = small_disk
    errors = fill_the_disk(tmp_path, home, file_limit)
    appends = [e for e in errors if e.startswith("append:")]
    assert len(appends) == 3
    assert all("No space left on device" in e or "File too large" in e for e in appends), appends
    acked = [msgspec.json.decode(line, type=Ack) for line in (tmp_path / "acks.log").read_bytes().splitlines()]
    assert len(acked) > 10
    make_room()
    host = ShardHost(home / "log" / "shard-000.duckdb", home / "projections", background=False)
    try:
        rows = host.store.query("SELECT seq, event_id FROM events ORDER BY seq")[1]
        assert [r[0] for r in rows] == list(range(1, len(rows) + 1))  # gap-free
        by_write: dict[str, list[int]] = {}
        for seq, event_id in rows:
            by_write.setdefault(event_id.rsplit("-e", 1)[0], []).append(seq)
        assert all(by_write.get(a.write.split("/")[0]) == a.seqs for a in acked)  # every acknowledged write
        assert all(len(seqs) == 20 for seqs in by_write.values())  # nothing half-written
        from tests.events.helpers import write

        host.append_many([write("after", range(10_000, 10_005))])  # the log takes writes again
        host.catch_up()  # the projections catch up once there is room
        assert host.status()["projection_lag"] == 0
        assert host.verify_replay() == []
    finally:
        host.close()


def _read_only(path) -> bool:
    """Make `path` read-only as a disk would be: a read-only bind mount as root, else the permission bits."""
    if os.geteuid() == 0:
        done = subprocess.run(["mount", "--bind", "-o", "ro", str(path), str(path)], capture_output=True).returncode == 0
        if done:
            return True
        return False
    for p in [path, *path.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    return True


def test_a_read_only_home_is_refused_with_one_clear_line_and_can_still_be_read(tmp_path):
    from engram.config.home import ProjectionPaths
    from engram.sql import HomeFiles, run_readonly
    from tests.events.helpers import write

    home = tmp_path / "home"
    host = ShardHost(home / "log" / "shard-000.duckdb", home / "projections", background=False)
    host.append_many([write("d", range(3))])
    host.catch_up()
    host.close()
    if not _read_only(home):
        pytest.skip("cannot make a read-only mount here")
    try:
        with pytest.raises(HomeNotWritable, match=r"home/log is not writable \(a read-only disk or mount\?\)"):
            ShardHost(home / "log" / "shard-000.duckdb", home / "projections", background=False)
        files = HomeFiles({0: home / "log" / "shard-000.duckdb"}, ProjectionPaths(home / "projections"))
        assert run_readonly("SELECT count(*) FROM messages", files).rows == [(3,)]
        store = EventStore(home / "log" / "shard-000.duckdb", read_only=True)
        assert store.head() == 3
        store.close()
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", "-l", str(home)], check=False)

"""The commands of issue 11 as a user runs them, against a home's server (here an in-process one)."""

from __future__ import annotations

import json

import duckdb
import pytest
from tests.cluster.test_reshard import AGENTS

from engram.cli.main import main


def serve_home(home):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    home.mkdir(exist_ok=True)
    mem = Engram(InProcessRuntime(load_service_config(home), wall_clock=False).start())
    with Served(mem):
        yield home, mem
    mem.close()


@pytest.fixture
def served_home(populated_copy):
    """A served copy of a populated home (tests/cluster/conftest.py)."""
    yield from serve_home(populated_copy)


@pytest.fixture
def new_served_home(tmp_path):
    """A served home with nothing in it yet: the usage errors are refused before the home is looked at."""
    yield from serve_home(tmp_path / "home")


def test_reshard_replay_all_and_export_commands_report_what_they_did(served_home, capsys):
    home, mem = served_home
    assert main(["--home", str(home), "reshard", "--shards", "3"]) == 0
    out = capsys.readouterr().out
    moved = sum(1 for a in AGENTS if mem.rt.shard_of(a) != 0)
    assert out.startswith(f"1 -> 3 shards: {moved} of {len(AGENTS)} agent(s) moved")
    assert all(f"  {a}: shard 0 -> {mem.rt.shard_of(a)}" in out for a in AGENTS if mem.rt.shard_of(a) != 0)

    assert main(["--home", str(home), "replay", "--all", "--out", str(home / "exports" / "replayed")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" on ")[0] for line in lines[:3]] == ["shard 0", "shard 1", "shard 2"]
    events = sum(n for (n,) in mem.rt.sql("SELECT count(*) FROM events")[1])  # positions have gaps: count them
    assert lines[-1].startswith(f"total: {events} events from 3 shard(s)")

    assert main(["--home", str(home), "export", "--parquet", str(home / "exports" / "pq")]) == 0
    assert "written to" in capsys.readouterr().out
    rows = duckdb.connect().execute(f"SELECT count(*) FROM '{home}/exports/pq/log/*.parquet'").fetchone()[0]
    assert rows == events


def test_reshard_to_fewer_shards_is_a_usage_error(new_served_home, capsys):
    home, _ = new_served_home
    assert main(["--home", str(home), "reshard", "--shards", "1"]) == 2
    assert "only adds shards" in capsys.readouterr().err


def test_replay_all_with_an_agent_is_a_usage_error(new_served_home, capsys):
    home, _ = new_served_home
    assert main(["--home", str(home), "replay", "--all", "--agent", AGENTS[0]]) == 2
    assert "--all replays every shard" in capsys.readouterr().err

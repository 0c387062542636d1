"""A home of several shards through the REST API: export as Parquet for plain DuckDB, replay of every shard with a
report, status naming each shard's node."""

from __future__ import annotations

import json

import duckdb
import pytest
from tests.cluster.test_reshard import AGENTS, populate

from engram.api import types as t
from engram.api.errors import ApiError


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    home = tmp_path_factory.mktemp("two-shards") / "home"
    home.mkdir()
    # Jobs write under the home's exports/ or server.exportRoot only: here the test session's temp directory.
    (home / "engram.json").write_text(json.dumps({"shards": 2, "server": {
        "exportRoot": str(tmp_path_factory.getbasetemp())}}))
    mem = Engram(InProcessRuntime(load_service_config(home), wall_clock=False).start())
    populate(mem)
    assert {mem.rt.shard_of(a) for a in AGENTS} == {0, 1}
    with Served(mem) as server:
        yield mem, server
    mem.close()


def test_export_writes_every_shards_log_and_projections_as_parquet_that_plain_duckdb_reads(served, tmp_path):
    mem, server = served
    out = tmp_path / "export"
    with server.client() as client:
        job = client.wait_job(client.export(str(out)).id, timeout=300)
    assert job.state == "succeeded", job.error
    heads = mem.rt.heads()
    con = duckdb.connect()
    assert con.execute(f"SELECT count(*) FROM '{out}/log/*.parquet'").fetchone()[0] == sum(heads.values())
    by_shard = con.execute(f"SELECT filename, max(seq) FROM read_parquet('{out}/log/*.parquet', filename=true) "
                           "GROUP BY filename ORDER BY filename").fetchall()
    assert [m for _, m in by_shard] == [heads[0], heads[1]]
    exported = con.execute(f"SELECT discussion_id, agent, messages FROM '{out}/projections/discussions/*.parquet' "
                           "ORDER BY discussion_id").fetchall()
    _, live = mem.rt.sql("SELECT discussion_id, agent, messages FROM discussions ORDER BY discussion_id")
    assert sorted(exported) == sorted(live) and len(exported) == len(AGENTS)
    assert {r["shard"] for r in job.result["shards"]} == {0, 1}
    assert all((out / "projections" / "agents" / a).is_dir() for a in AGENTS)


def test_export_refuses_a_directory_that_is_not_empty(served, tmp_path):
    _, server = served
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    with server.client() as client, pytest.raises(ApiError) as refused:
        client.export(str(tmp_path / "busy"))
    assert refused.value.code == "conflict"


def test_replay_of_every_shard_reports_events_per_second_per_shard_and_in_total(served, tmp_path):
    mem, server = served
    with server.client() as client:
        job = client.wait_job(client.replay(out=str(tmp_path / "replayed")).id, timeout=300)
    assert job.state == "succeeded", job.error
    report = job.result
    heads = mem.rt.heads()
    assert [r["shard"] for r in report["shards"]] == [0, 1]
    assert [r["events"] for r in report["shards"]] == [heads[0], heads[1]]
    assert report["events"] == sum(heads.values()) and report["events_per_s"] > 0
    assert all(r["events_per_s"] > 0 and r["node"] for r in report["shards"])


def test_status_names_the_node_of_every_shard_and_its_actors(served):
    _, server = served
    with server.client() as client:
        shards = client.status().shards
    assert len(shards) == 2 and all(s.node and s.actors[f"shard-{s.shard:03d}"] == s.node for s in shards)


def test_sql_over_two_shards_merges_aggregates_orders_and_limits_as_one_log(served):
    mem, server = served
    heads = mem.rt.heads()
    with server.client() as client:
        total = client.sql("SELECT count(*) FROM events").rows
        per_agent = client.sql("SELECT agent, count(*) AS n FROM messages GROUP BY agent ORDER BY agent").rows
        top = client.sql("SELECT discussion_id FROM discussions ORDER BY discussion_id LIMIT 3").rows
        shards = client.sql("SELECT DISTINCT shard FROM events ORDER BY shard").rows
    assert total == [[sum(heads.values())]]  # one row: the count over both shards, not one per shard
    assert per_agent == [[a, 5] for a in sorted(AGENTS)]
    assert top == [["trip-0"], ["trip-1"], ["trip-2"]]
    assert shards == [[0], [1]]


def test_sql_over_two_shards_reports_a_bad_query_as_such(served):
    _, server = served
    with server.client() as client, pytest.raises(ApiError) as refused:
        client.sql("SELECT nope FROM events")
    assert refused.value.code == "bad_query" and "nope" in refused.value.message

"""The shard's memory is bounded by agents in use: its traces projection keeps the memory of its
`ray.shardResidentAgents` most recently folded agents, lets the others go once checkpointed, and reads an
agent back from its rows and index files when its events come again. What it writes (rows, index files) and
what a user reads (SQL, recall) is then what an unbounded shard gives, and replay still reproduces it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.policies.test_eviction import SAID, T0, turn

from engram.config.home import Home
from engram.config.service import ServiceConfig
from engram.policies.auto_ingest import AutoIngest
from engram.policies.base import PolicyContext
from engram.policies.host import PolicyHost
from engram.policies.trace_reader import TraceReader
from engram.projections.compare import differences
from engram.shard.host import ShardHost

TABLES = {
    "memory_traces": "SELECT * FROM memory_traces ORDER BY trace_id",
    "trace_edges": "SELECT * FROM trace_edges ORDER BY agent, src, dst, kind",
    "trace_changes": "SELECT * FROM trace_changes ORDER BY agent, seq, trace_id, change",
}
# Ann speaks, Bob and Cid speak while she is idle, Ann's memory is recalled (the retrieval is recorded: it
# reinforces her traces and wires them together), she speaks again, and is recalled again after Bob (the edges of
# the first recall are strengthened): with one resident agent her memory is let go and read back each time.
SCRIPT = [("ann", 0), ("ann", 1), ("bob", 0), ("cid", 0), ("bob", 1), ("cid", 1), "recall ann", ("ann", 0), ("bob", 0),
          ("ann", 1), "recall bob", "recall ann", ("cid", 1), "recall ann"]


@pytest.fixture(scope="module")
def services():
    from engram.providers.embeddings import make_embedder
    from engram.providers.llm.factory import make_tasks

    config = ServiceConfig()
    return {"tasks": make_tasks(config.llm), "embedder": make_embedder(config.embedder)}


def configured(services, resident: int | None) -> dict:
    config = ServiceConfig()
    ray = config.ray.model_copy(update={"shard_resident_agents": resident})
    return {**services, "config": config.model_copy(update={"ray": ray})}


def traces_of(shard: ShardHost):
    return next(p for p in shard.runner.projections if p.name == "traces")


def run(root: Path, svc: dict, script=SCRIPT, start: int = 0) -> tuple[ShardHost, dict]:
    """The script through a shard and its auto-ingest and trace reader; the recalls' answers."""
    shard = ShardHost(root / "log.duckdb", root / "proj", background=False, services=svc)
    home = Home(root)
    ctx = PolicyContext(shard=0, home=home, services=svc, read=shard.read, append=shard.append_many)
    reader = TraceReader(ctx)
    host = PolicyHost([AutoIngest(ctx), reader], read=shard.read, append=shard.append_many, head=shard.head,
                      state_dir=home.root / "state")
    host.run_until_caught_up()  # after a restart: the policies catch up with the log first
    answers = {}
    for n, step in enumerate(script, start=start):
        if isinstance(step, str):
            agent = step.split()[1]
            result = reader.recall(agent, "where does my family live and what do I do", now_us=T0 + n * 60_000_000)
            shard.append_many(reader.take_writes())
            answers[(n, step)] = [(h.trace_id, round(h.score, 6)) for h in result.hits]
        else:
            agent, k = step
            shard.append_many([turn(agent, n, SAID[agent][k])])
        host.run_until_caught_up()
        shard.catch_up()  # folded and checkpointed: what is not resident is in the tables and files
    return shard, answers


def tables(shard: ShardHost) -> dict:
    return {name: shard.query(sql)[1] for name, sql in TABLES.items()}


def test_a_shard_keeps_only_its_resident_agents_and_writes_and_answers_as_an_unbounded_one(tmp_path, services):
    kept, kept_answers = run(tmp_path / "kept", configured(services, None))
    bounded, bounded_answers = run(tmp_path / "bounded", configured(services, 1))
    try:
        unbounded, one = traces_of(kept), traces_of(bounded)
        assert sorted(unbounded.memories) == ["ann", "bob", "cid"] and unbounded.evicted == 0
        assert len(one.memories) == 1  # one agent's memory held at a time...
        assert one.evicted >= 5 and one.restored >= 5  # ...the others let go and read back as they spoke
        assert all(rows for rows in tables(kept).values())
        assert tables(bounded) == tables(kept)  # SQL sees the same rows
        assert bounded_answers == kept_answers and all(kept_answers.values())  # recall answers the same
        assert differences(kept.paths.root, bounded.paths.root, [Path("agents")]) == []  # index files byte for byte
        assert bounded.verify_replay() == []  # and replay reproduces what the bounded shard wrote
    finally:
        kept.close()
        bounded.close()


def test_after_a_restart_an_agents_memory_is_read_back_when_its_events_come(tmp_path, services):
    svc = configured(services, 2)
    first, _ = run(tmp_path / "home", svc, SCRIPT[:6])
    first.close()
    again, answers = run(tmp_path / "home", svc, SCRIPT[6:10], start=6)  # nothing is loaded at start
    kept, kept_answers = run(tmp_path / "kept", configured(services, None), SCRIPT[:10])
    try:
        assert sorted(traces_of(again).memories) == ["ann", "bob"]  # Cid, silent since the restart, was never read
        assert traces_of(again).restored == 2
        assert answers == kept_answers
        assert tables(again) == tables(kept)
        assert differences(kept.paths.root, again.paths.root, [Path("agents")]) == []
        assert again.verify_replay() == []
    finally:
        again.close()
        kept.close()


def test_the_resident_agents_of_a_shard_are_a_validated_setting():
    assert ServiceConfig.model_validate({"ray": {"shardResidentAgents": 64}}).ray.shard_resident_agents == 64
    with pytest.raises(ValueError, match="shardResidentAgents"):
        ServiceConfig.model_validate({"ray": {"shardResidentAgents": 0}})

"""A checkpoint writes every agent's and every discussion's changes in a few statements (one DELETE and one Arrow
insert per table for all of them, the changed discussions' rows read in one query to render their files), not a
few statements per agent and per discussion (issue 27). What it writes is what a checkpoint per agent writes: two
agents whose traces, edges, working memory and discussion memories change, and who each forget a discussion, in
one checkpoint, give the tables and files of a fold that checkpoints after every event (one agent's, one
discussion's changes at a time)."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from engram.api import types as t
from engram.boot.embedded import Engram
from engram.config.home import ProjectionPaths
from engram.memory.discussion.files import MEMORIES_SUFFIX, VECTOR_SUFFIX
from engram.projections.base import ProjectionContext
from engram.projections.compare import differences
from engram.projections.discussion_base import DiscussionMeta, render_groups
from engram.projections.registry import build_projections
from engram.projections.runner import ProjectionRunner

AGENTS = ("ann", "bob")
SAID = [
    "I'm building a Next.js app called Acme Dashboard with Supabase auth, due on March 9.",
    "My sister Ana moved to Lisbon in 2021 and she works as a marine biologist there.",
    "I run a bakery in Porto called Pao Quente and we open at six every morning.",
    "My daughter Rita starts university in Coimbra this September, studying physics.",
    "I'm training for the Berlin marathon in September with a coach named Jonas.",
    "My favourite climbing gym is Boulderwelt in Munich, I go there every Tuesday.",
]


def _say(mem: Engram, agent: str, discussion: str, i: int) -> None:
    mem.append_messages(agent, discussion, t.AppendRequest(messages=[t.Message(
        role="user" if i % 2 == 0 else "assistant", message_id=f"{discussion}-{i}",
        content=f"{SAID[i % len(SAID)]} (said in {discussion}, turn {i})")]))


def _fold(shard, out: Path, *, checkpoint_after: list[int]) -> None:
    """`shard`'s log folded into fresh projections under `out`, a checkpoint after each seq of `checkpoint_after`."""
    paths = ProjectionPaths(out)
    paths.root.mkdir(parents=True)
    db = duckdb.connect(str(paths.shard_db(0)))
    try:
        runner = ProjectionRunner(build_projections(ProjectionContext(0, paths, db, shard.services)), shard.store.read)
        for seq in checkpoint_after:
            runner.catch_up(to_seq=seq)
        runner.close()
    finally:
        db.close()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """Two agents, two discussions each, chunked every 3 messages: their traces, edges, working memory, chunk and
    vector memories; then more of each for both, and each forgets one of its discussions. Returns the shard's
    log, the seq before the second part and the last seq."""
    root = tmp_path_factory.mktemp("batching")
    (root / "engram.json").write_text(json.dumps({"shards": 1}))
    (root / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(
        {"chunkEstimatedTokenSize": 40, "maxMessagesBetweenChunks": 3, "lookbackStartTurn": 0}))
    mem = Engram.open(root, runtime="inprocess", auto_settle=False)
    for i in range(4):
        for agent in AGENTS:
            for d in ("a", "b"):
                _say(mem, agent, f"{agent}-{d}", i)
        mem.wait_idle()
    shard = mem.rt.shard_host(0)
    first = shard.head()
    for i in range(4, 8):
        for agent in AGENTS:
            _say(mem, agent, f"{agent}-b", i)
    mem.wait_idle()
    for agent in AGENTS:
        shard.begin_forget(agent, f"{agent}-a")  # the marker alone: the projections drop what came of it
    mem.wait_idle()
    yield mem, shard, first, shard.head()
    mem.close()


def _tables(out: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(ProjectionPaths(out).shard_db(0)), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_one_checkpoint_of_two_agents_changes_and_forgets_writes_what_a_checkpoint_per_event_writes(home, tmp_path):
    _, shard, first, last = home
    together, one_by_one = tmp_path / "together", tmp_path / "one-by-one"
    _fold(shard, together, checkpoint_after=[first, last])  # the second part: both agents' changes in one checkpoint
    _fold(shard, one_by_one, checkpoint_after=[first, *range(first + 1, last + 1)])
    assert differences(together, one_by_one) == []
    assert differences(shard.paths.root, together, [Path("agents")]) == []  # and the live shard's files

    # What the one checkpoint had to write for both agents: new traces and forgotten ones, edges, changes, working
    # memory's key traces, discussion memories, the forgotten discussions' rows gone.
    per_agent = "SELECT agent, count(*) FROM {} GROUP BY agent ORDER BY agent"
    for table in ("memory_traces", "trace_edges", "trace_changes", "discussion_memories", "vector_memories",
                  "working_memory_state"):
        assert [a for a, n in _tables(together, per_agent.format(table)) if n] == list(AGENTS), table
    forgotten = _tables(together, "SELECT count(*) FROM memory_traces WHERE stream IN ('ann-a', 'bob-a')")
    assert forgotten == [(0,)]
    assert _tables(together, "SELECT DISTINCT discussion_id FROM discussion_memories ORDER BY 1") == [("ann-b",), ("bob-b",)]
    # Each discussion's files are its own rows (rendered together, each file from its discussion's rows alone).
    paths = ProjectionPaths(together)
    for agent, discussion in [(a, f"{a}-b") for a in AGENTS]:
        lines = _tables(together, f"SELECT line FROM discussion_memories WHERE agent = '{agent}' "
                                  f"AND discussion_id = '{discussion}' ORDER BY ordinal")
        assert lines
        assert paths.discussion_file(agent, discussion, MEMORIES_SUFFIX).read_text() == "".join(f"{x}\n" for (x,) in lines)
        stored = _tables(together, f"SELECT count(*) FROM vector_memories WHERE agent = '{agent}' "
                                   f"AND discussion_id = '{discussion}'")[0][0]
        store = duckdb.connect(str(paths.discussion_file(agent, discussion, VECTOR_SUFFIX)), read_only=True)
        try:
            assert store.execute("SELECT count(*) FROM memories").fetchone()[0] == stored > 0
        finally:
            store.close()
    before = tmp_path / "before"
    _fold(shard, before, checkpoint_after=[first])
    assert _tables(before, "SELECT count(*) FROM memory_traces WHERE stream IN ('ann-a', 'bob-a')")[0][0] > 0
    edges = _tables(before, "SELECT agent, count(*) FROM trace_edges GROUP BY agent ORDER BY agent")
    assert [a for a, _ in edges] == list(AGENTS)


def test_discussions_are_rendered_in_bounded_groups():
    metas = [((f"a{i}", "d"), DiscussionMeta(f"a{i}", count=n)) for i, n in enumerate([0, 3, 1_999, 5, 2_000, 1])]
    assert [[k[0] for k, _ in g] for g in render_groups(metas)] == [["a0", "a1"], ["a2"], ["a3"], ["a4"], ["a5"]]
    many = [((f"a{i}", "d"), DiscussionMeta(f"a{i}")) for i in range(1_100)]
    assert [len(g) for g in render_groups(many)] == [512, 512, 76]

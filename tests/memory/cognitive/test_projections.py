"""The trace and working-memory projections resume exactly after a restart and replay to the same state."""

from __future__ import annotations

import json

from tests.memory.cognitive.helpers import HOUR_US, T0

from engram.config.agent import AgentConfig
from engram.config.recorded import SCOPE_AGENT
from engram.config.service import ServiceConfig
from engram.events.cognitive import (
    EdgeAdded,
    MoodChanged,
    Slot,
    TraceEncoded,
    TracePruned,
    TraceRetrieved,
    WorkingMemoryUpdated,
    WorkingMemoryWritten,
)
from engram.events.control import DiscussionForgotten
from engram.events.envelope import NewEvent, Write
from engram.memory.settings import settings_event
from engram.shard.host import ShardHost


def encoded(tid: str, category: str, scope_id: str, context: str = "") -> TraceEncoded:
    return TraceEncoded(
        trace_id=tid, content=f"{category} memory {tid}", trace_type="semantic", scope="discussion", scope_id=scope_id,
        source_type="user_statement", source_seqs=(1,), importance=0.6, confidence=0.8, strength=0.5,
        stability_s=3600.0, interval_s=3600.0, category=category, source_message_ids=("D1:1",), context=context,
    )


def w(stream: str, *events, at: int = T0) -> Write:
    return Write(stream=stream, agent="a", events=tuple(NewEvent(e, at + i) for i, e in enumerate(events)))


def test_projections_resume_after_a_restart_and_equal_a_full_replay(tmp_path):
    services = {"config": ServiceConfig()}
    cfg = AgentConfig.model_validate({"memory": {"infiniteContext": {"contextWindowTokens": 20_000}}})

    def open_shard() -> ShardHost:
        return ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False, services=services)

    shard = open_shard()
    shard.append_many([
        w("agent:a", settings_event(SCOPE_AGENT, "agent.config.json", cfg)),
        w("d", encoded("t1", "user_preference", "d"), encoded("t2", "message", "d", "Assistant: Which theme?"),
          encoded("t3", "knowledge", "d")),
        w("e", encoded("t4", "goal", "e")),
        w("d", EdgeAdded(src="t1", dst="t2", kind="temporal_sequence", weight=0.6)),
        w("agent:a", WorkingMemoryUpdated(turn=1, capacity=7, reason="encoded", focused=("t1",),
                                          slots=(Slot(trace_id="t1", activation=0.8, content="x", entered_turn=1),)),
          WorkingMemoryWritten(markdown="## Notes\n- remember the launch\n"), MoodChanged(valence=0.4, arousal=0, dominance=0)),
    ])
    shard.catch_up()
    shard.close()

    shard = open_shard()  # restart: the projections restore from their tables and files
    try:
        assert shard.projection_position() == shard.head()
        shard.append_many([
            w("d", TraceRetrieved(query="q", trace_ids=("t1", "t3")), at=T0 + HOUR_US),
            w("d", TracePruned(trace_id="t3", strength=0.01), at=T0 + 9 * HOUR_US),
            w("e", DiscussionForgotten(discussion_id="e"), at=T0 + 10 * HOUR_US),
        ])
        shard.catch_up()
        names, rows = shard.query("SELECT trace_id, active, retrieval_count, context FROM memory_traces ORDER BY trace_id")
        assert rows == [("t1", True, 1, ""), ("t2", True, 0, "Assistant: Which theme?"), ("t3", False, 1, "")]
        _, edges = shard.query("SELECT kind FROM trace_edges ORDER BY kind")
        assert [e for (e,) in edges] == ["co_activated", "temporal_sequence"]
        text = (tmp_path / "proj" / "agents" / "a" / "working-memory.md").read_text()
        assert "remember the launch" in text and "budget 1000 tokens" in text
        assert "user_preference memory t1" in text and "goal memory t4" not in text  # forgotten with its discussion
        meta = json.loads((tmp_path / "proj" / "agents" / "a" / "traces.hnsw.json").read_text())
        assert meta["ids"] == ["t1", "t2"] and meta["deleted"] == []  # rebuilt when "e" was forgotten: active traces only
        assert shard.verify_replay() == []  # restarted live state == replay from the start, byte for byte
    finally:
        shard.close()


def test_the_profile_picks_up_the_users_stated_name_until_someone_writes_the_notes(tmp_path, ):
    """Issue 12, finding 6: the working-memory profile's Name stayed blank after "my name is Priya"."""
    from engram.providers.embeddings import make_embedder
    from engram.providers.llm.factory import make_tasks
    from engram.policies.auto_ingest import AutoIngest
    from engram.policies.base import PolicyContext
    from engram.config.home import Home
    from engram.events.messages import MessageAppended

    services = {"config": ServiceConfig(), "tasks": make_tasks(None), "embedder": make_embedder(ServiceConfig().embedder)}
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False, services=services)
    try:
        said = MessageAppended(role="user", content="Hi, my name is Priya and I live in Lisbon.", message_id="m1",
                               token_estimate=12)
        shard.append_many([w("d", said)])
        policy = AutoIngest(PolicyContext(shard=0, home=Home(tmp_path), services=services))
        shard.append_many(policy.handle(shard.read(0, limit=None)))
        shard.catch_up()
        text = (tmp_path / "proj" / "agents" / "a" / "working-memory.md").read_text()
        assert "- **Name**: Priya" in text
        # A fact stating who the user is is kept, not dropped below the importance threshold.
        _, rows = shard.query("SELECT count(*) FROM memory_traces WHERE category <> 'message' AND content LIKE '%Priya%'")
        assert rows[0][0] == 1
        shard.append_many([w("agent:a", WorkingMemoryWritten(markdown="## My notes\n- the user prefers short answers\n"))])
        shard.catch_up()
        text = (tmp_path / "proj" / "agents" / "a" / "working-memory.md").read_text()
        assert "short answers" in text and "Priya" not in text.split("## Key Memories")[0]
        assert shard.verify_replay() == []
    finally:
        shard.close()

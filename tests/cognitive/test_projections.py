"""The trace and working-memory projections resume exactly after a restart and replay to the same state."""

from __future__ import annotations

import json

from engram.config.agent import AgentConfig
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
from engram.settings import SCOPE_AGENT, settings_event
from engram.shard import ShardHost

from tests.cognitive.helpers import HOUR_US, T0


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

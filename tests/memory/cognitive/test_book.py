"""The fold of cognitive events into traces: a trace's life, verifications, conflicts, forgetting."""

from __future__ import annotations

import numpy as np
import pytest
from tests.memory.cognitive.helpers import HOUR_US, T0, rec, unit

from engram.events.cognitive import (
    ConflictResolved,
    EdgeAdded,
    FactsIngested,
    MoodChanged,
    SkippedFact,
    TraceEncoded,
    TraceRetrieved,
)
from engram.events.control import DiscussionForgotten
from engram.memory.cognitive.book import TraceBook
from engram.memory.cognitive.decay import decay_sweep
from engram.memory.cognitive.memory import AgentMemory


def encoded(tid: str, stream_scope: str = "d") -> TraceEncoded:
    return TraceEncoded(
        trace_id=tid, content=f"memory {tid}", trace_type="episodic", scope="discussion", scope_id=stream_scope,
        source_type="user_statement", source_seqs=(1,), importance=0.5, confidence=0.8, strength=0.5,
        stability_s=3600.0, interval_s=3600.0, source_message_ids=("D1:1",),
    )


def test_a_traces_life_encode_retrieve_reinforce_decay_prune():
    book = TraceBook("a", track=True)
    book.apply(rec(encoded("t"), seq=1))
    book.apply(rec(TraceRetrieved(query="q", trace_ids=("t",)), seq=2, ts_us=T0 + HOUR_US))
    t = book.traces["t"]
    assert t.retrieval_count == 1 and t.interval_s == 7_200 and t.stability_s > 3_600
    assert t.last_access_us == T0 + HOUR_US
    later = T0 + HOUR_US + int(40 * t.stability_s * 1_000_000)
    (pruned,) = decay_sweep(book.active(), later)
    book.apply(rec(pruned, seq=3, ts_us=later))
    assert not t.active and t.deleted_reason == "decay" and book.active() == []
    changes = [(c.change, c.seq) for c in book.changes]
    assert changes == [("encoded", 1), ("retrieved", 2), ("pruned", 3)]
    retrieved = book.changes[1]
    assert retrieved.strength_before == pytest.approx(0.5 * np.exp(-1))
    assert retrieved.strength_after > retrieved.strength_before


def test_retrieved_traces_that_fire_together_are_linked():
    book = TraceBook("a")
    for i, tid in enumerate("abc", 1):
        book.apply(rec(encoded(tid), seq=i))
    book.apply(rec(TraceRetrieved(query="q", trace_ids=("a", "b", "c")), seq=4))
    assert {k for k in book.graph.edges} == {("a", "b", "co_activated"), ("a", "c", "co_activated"), ("b", "c", "co_activated")}
    assert book.traces["a"].links == {"b", "c"}


def test_a_restated_fact_verifies_the_trace_it_duplicates():
    book = TraceBook("a")
    book.apply(rec(encoded("t"), seq=1))
    skipped = SkippedFact(content="again", category="knowledge", importance=0.5, reason="duplicate", duplicate_of="t", similarity=0.9)
    book.apply(rec(FactsIngested(source_seq=2, message_id="m2", trace_ids=(), skipped=(skipped,)), seq=3))
    assert book.traces["t"].verification_count == 1


def test_a_resolved_conflict_marks_and_retires_the_loser_unless_both_are_kept():
    book = TraceBook("a")
    for i, tid in enumerate(("old", "new", "other"), 1):
        book.apply(rec(encoded(tid), seq=i))
    book.apply(rec(EdgeAdded(src="new", dst="other", kind="contradicts", weight=1.0), seq=4))
    assert book.traces["other"].contradicted_by == ("new",) and book.traces["other"].active
    book.apply(rec(ConflictResolved(winner="new", loser="old", resolution="prefer_newer"), seq=5))
    assert not book.traces["old"].active and book.traces["old"].contradicted_by == ("new",)


def test_forgetting_a_discussion_drops_its_traces_and_their_vectors():
    mem = AgentMemory("a", 8, track=True)
    embed = lambda texts: np.stack([unit(1, i) for i in range(len(texts))])  # noqa: E731
    mem.apply_batch([rec(encoded("kept", "d"), seq=1, stream="d"), rec(encoded("gone", "e"), seq=2, stream="e")], embed)
    mem.apply_batch([rec(EdgeAdded(src="kept", dst="gone", kind="same_topic", weight=0.7), seq=3)], embed)
    mem.apply_batch([rec(DiscussionForgotten(discussion_id="e"), seq=4, stream="e")], embed)
    assert set(mem.book.traces) == {"kept"} and len(mem.book.graph) == 0
    assert mem.index.ids == ["kept"]  # the index was rebuilt without the forgotten vector
    assert mem.book.traces["kept"].links == set()


def test_mood_changes_are_folded():
    book = TraceBook("a")
    book.apply(rec(MoodChanged(valence=0.5, arousal=0.1, dominance=0.0), seq=1, stream="agent:a"))
    assert book.mood.valence == 0.5


def test_nearest_asks_the_filter_about_the_nearest_only_unless_one_of_them_is_excluded():
    mem = AgentMemory("a", 8)
    ids = [f"t{i}" for i in range(40)]
    vectors = {tid: unit(1.0, 0.05 * i, 0.01 * (i % 7)) for i, tid in enumerate(ids)}
    mem.apply_batch([rec(encoded(tid), seq=i + 1) for i, tid in enumerate(ids)],
                    lambda texts: np.stack([vectors[f"t{int(t.split('t')[-1])}"] for t in texts]))
    asked = []

    def anything(tid):
        asked.append(tid)
        return True

    found = mem.nearest(unit(1.0), 4, anything)
    assert [tid for tid, _ in found] == ["t0", "t1", "t2", "t3"] and len(asked) == 4
    # The nearest is excluded: the search is filtered, and the result is the nearest allowed ones.
    found = mem.nearest(unit(1.0), 4, lambda tid: tid != "t0")
    assert [tid for tid, _ in found] == ["t1", "t2", "t3", "t4"]

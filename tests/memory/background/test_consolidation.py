"""One consolidation run: the five steps, each pinned, and the bound on a run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from engram.config import defaults as d
from engram.config.agent import AgentConfig
from engram.events.cognitive import (
    ConflictResolved,
    EdgeAdded,
    SchemaCreated,
    TraceEncoded,
    TracePruned,
    TraceReinforced,
)
from engram.events.envelope import Recorded
from engram.memory.background import consolidation as c
from engram.memory.background.traces import TraceFold
from engram.memory.cognitive.encoding import encode
from engram.memory.cognitive.personality import Pad
from engram.providers.llm.factory import make_tasks

HOUR_US = 3_600 * 1_000_000
MINUTE_US = 60 * 1_000_000
NOW = 1_772_460_000 * 1_000_000
TASKS = make_tasks(None)


def add(fold: TraceFold, tid: str, *, at: int, importance: float = 0.3, stream: str = "d", entities=(),
        trace_type: str = "episodic", confidence: float = 0.7, content: str | None = None, state=None) -> None:
    ev = encode(trace_id=tid, content=content or f"memory {tid}", config=AgentConfig(), scope="discussion",
                scope_id=stream, source_type="user_statement", source_seqs=(1,), source_message_ids=("m1",),
                trace_type=trace_type, importance=importance, confidence=confidence, entities=tuple(entities))
    rec = Recorded(seq=0, stream=stream, stream_version=0, agent="a", ts_us=at, event=ev)
    fold.apply(rec)
    if state is not None:
        state.observe(ev, at)


def edge(fold: TraceFold, src: str, dst: str, kind: str, at: int = NOW, state=None) -> None:
    ev = EdgeAdded(src=src, dst=dst, kind=kind, weight=1.0)
    fold.apply(Recorded(seq=0, stream="d", stream_version=0, agent="a", ts_us=at, event=ev))
    if state is not None:
        state.observe(ev, at)


def config(**consolidation) -> AgentConfig:
    return AgentConfig.model_validate({"memory": {"consolidation": consolidation}})


def run(fold, state=None, *, now=NOW, cfg=None, vectors=None, personality=None) -> c.RunResult:
    cfg = cfg or AgentConfig()
    if personality:
        cfg = AgentConfig.model_validate({**cfg.to_json_dict(), "personality": personality})
    return c.run("a", fold, state or c.ConsolidationState(), now_us=now, config=cfg, mood=Pad(),
                 vectors=vectors or (lambda ids, texts: np.eye(len(ids), 8, dtype=np.float32)),
                 summarize=TASKS.summarize_schema)


def events(result, kind):
    return [x.event for x in result.decisions if isinstance(x.event, kind)]


def ago_for_strength(strength: float) -> int:
    """How long before NOW a fresh (S0 0.5, stability 1 h) trace was encoded to be at `strength` now."""
    return int(d.INITIAL_STABILITY_S * math.log(d.BASE_ENCODING_STRENGTH / strength) * 1_000_000)


def test_the_decay_sweep_soft_deletes_traces_below_strength_0_05():
    fold = TraceFold("a")
    add(fold, "weak", at=NOW - ago_for_strength(0.049))
    add(fold, "kept", at=NOW - ago_for_strength(0.051))
    result = run(fold)
    (pruned,) = events(result, TracePruned)
    assert pruned.trace_id == "weak" and pruned.strength == pytest.approx(0.049, abs=1e-4)
    assert result.pruned == 1 and not fold.book.traces["weak"].active and fold.book.traces["kept"].active
    prune = next(x for x in result.decisions if isinstance(x.event, TracePruned))
    assert prune.stream == "d" and prune.event_id == f"prune:weak:{NOW}" and prune.ts_us == NOW


def test_a_step_is_bounded_per_boundary_and_the_rest_waits_for_the_next_boundary():
    fold = TraceFold("a")
    for i in range(5):
        add(fold, f"t{i}", at=NOW - 10 * HOUR_US - i * MINUTE_US)  # all fall below 0.05 by the same boundary
    result = run(fold, cfg=config(maxTracesPerRun=3))
    prunes = [(x.event.trace_id, x.ts_us) for x in result.decisions if isinstance(x.event, TracePruned)]
    first = prunes[0][1]
    assert prunes == [("t4", first), ("t3", first), ("t2", first), ("t1", first + HOUR_US), ("t0", first + HOUR_US)]
    assert first == NOW - 7 * HOUR_US and "decay" in result.bounded  # each pruned at its own boundary, in the past


def test_co_activation_replay_links_shared_entities_and_traces_encoded_close_in_time():
    fold = TraceFold("a")
    add(fold, "x", at=NOW - 2 * HOUR_US, entities=("Ana",), importance=0.9)
    add(fold, "y", at=NOW - HOUR_US, entities=("ana",), stream="d2", importance=0.9)
    add(fold, "z", at=NOW - 30 * MINUTE_US, importance=0.9)
    add(fold, "w", at=NOW - 28 * MINUTE_US, importance=0.9)
    add(fold, "v", at=NOW - 10 * MINUTE_US, importance=0.9)
    add(fold, "old", at=NOW - 30 * HOUR_US, entities=("Ana",), importance=0.9)
    result = run(fold)
    added = {(e.src, e.dst, e.kind, e.weight) for e in events(result, EdgeAdded)}
    assert added == {("x", "y", "shared_entity", d.REPLAY_ENTITY_WEIGHT), ("z", "w", "temporal_sequence", d.REPLAY_TEMPORAL_WEIGHT)}
    assert next(x.stream for x in result.decisions if isinstance(x.event, EdgeAdded) and x.event.src == "x") == "d2"
    assert result.edges == 2 and run(fold, now=NOW + 1).edges == 0  # an edge is made once


def test_schema_integration_summarises_a_cluster_of_five_related_episodic_traces():
    fold = TraceFold("a")
    state = c.ConsolidationState()
    topics = ["hiking in the Alps", "hiking near Zurich", "a hiking trip with Tom", "hiking boots", "hiking at dawn"]
    for i, topic in enumerate(topics):
        add(fold, f"h{i}", at=NOW - (i + 1) * MINUTE_US, content=f"Maya went {topic} and loved it.", importance=0.5,
            entities=("Maya",))
    add(fold, "other", at=NOW - 9 * MINUTE_US, content="Maya paid the electricity bill.")
    base = np.array([1, 0, 0, 0], dtype=np.float32)
    vecs = {f"h{i}": base + np.array([0, 0.1 * i, 0, 0], dtype=np.float32) for i in range(5)}
    vecs["other"] = np.array([0, 0, 1, 0], dtype=np.float32)
    vectors = lambda ids, texts: np.stack([vecs[i] / np.linalg.norm(vecs[i]) for i in ids])  # noqa: E731
    result = run(fold, state, vectors=vectors)
    (schema,) = events(result, SchemaCreated)
    assert set(schema.member_ids) == {f"h{i}" for i in range(5)} and schema.llm is not None
    trace = next(e for e in events(result, TraceEncoded) if e.trace_id == schema.schema_trace_id)
    assert trace.trace_type == "semantic" and trace.source_type == "schema" and trace.entities == ("Maya",)
    links = [e for e in events(result, EdgeAdded) if e.kind == "schema_instance"]
    assert {(e.src, e.dst) for e in links} == {(f"h{i}", schema.schema_trace_id) for i in range(5)}
    assert all(e.weight == d.SCHEMA_INSTANCE_WEIGHT for e in links) and result.schemas == 1 and result.llm_calls == 1
    assert run(fold, state, now=NOW + 1, vectors=vectors).schemas == 0  # members are not clustered again


def test_four_related_traces_are_not_yet_a_schema():
    fold = TraceFold("a")
    for i in range(4):
        add(fold, f"h{i}", at=NOW - i * MINUTE_US)
    same = lambda ids, texts: np.ones((len(ids), 4), dtype=np.float32) / 2  # noqa: E731
    assert run(fold, vectors=same).schemas == 0


def contradiction(state) -> TraceFold:
    fold = TraceFold("a")
    add(fold, "older", at=NOW - 2 * HOUR_US, confidence=0.9, importance=0.9, trace_type="semantic", state=state)
    add(fold, "newer", at=NOW - HOUR_US, confidence=0.6, importance=0.9, trace_type="semantic", state=state)
    edge(fold, "newer", "older", "contradicts", state=state)
    return fold


@pytest.mark.parametrize("personality, how, loser", [
    ({"honesty": 0.8}, "prefer_newer", "older"),
    ({}, "prefer_confidence", "newer"),
])
def test_conflict_resolution_scans_contradiction_edges(personality, how, loser):
    state = c.ConsolidationState()
    fold = contradiction(state)
    result = run(fold, state, personality=personality)
    (resolved,) = events(result, ConflictResolved)
    assert (resolved.resolution, resolved.loser) == (how, loser)
    assert not fold.book.traces[loser].active and result.conflicts == 1
    assert ("supersedes" in {e.kind for e in events(result, EdgeAdded)})
    assert run(fold, state, now=NOW + 1, personality=personality).conflicts == 0


def test_kept_contradictions_are_resolved_when_the_personality_no_longer_keeps_both():
    state = c.ConsolidationState()
    fold = contradiction(state)
    kept = run(fold, state, personality={"agreeableness": 0.8})
    assert [r.resolution for r in events(kept, ConflictResolved)] == ["keep_both"]
    assert fold.book.traces["older"].active and fold.book.traces["newer"].active
    assert run(fold, state, now=NOW + 1, personality={"agreeableness": 0.8}).conflicts == 0  # recorded once
    honest = run(fold, state, now=NOW + HOUR_US, personality={"honesty": 0.8})  # at the next boundary
    assert [(r.resolution, r.loser) for r in events(honest, ConflictResolved)] == [("prefer_newer", "older")]


def test_spaced_repetition_reviews_due_traces_worth_keeping():
    fold = TraceFold("a")
    add(fold, "important", at=NOW - 90 * MINUTE_US, importance=0.8)
    add(fold, "small-talk", at=NOW - 90 * MINUTE_US, importance=0.3)
    add(fold, "not-due", at=NOW - 30 * MINUTE_US, importance=0.8)
    result = run(fold)
    (review,) = events(result, TraceReinforced)
    assert review.trace_id == "important" and result.reinforced == 1
    t = fold.book.traces["important"]
    assert t.interval_s == 2 * d.INITIAL_REINFORCEMENT_INTERVAL_S  # the interval doubles on success
    assert t.next_due_us == NOW + 2 * HOUR_US and t.last_access_us == NOW


def test_traces_from_after_the_tick_take_no_part():
    fold = TraceFold("a")
    add(fold, "later", at=NOW + MINUTE_US, entities=("Ana",))
    add(fold, "now", at=NOW - MINUTE_US, entities=("Ana",))
    result = run(fold)
    assert result.traces == 1 and result.decisions == []


def test_a_trace_that_arrives_after_later_runs_is_consolidated_on_its_own_timeline():
    """Issue 12, finding 1: a conversation imported after a newer one was pruned at the first tick, unreviewed."""
    state = c.ConsolidationState()
    fold = TraceFold("a")
    run(fold, state, now=NOW)  # consolidation has run through NOW
    add(fold, "late-small-talk", at=NOW - 30 * 24 * HOUR_US - 5 * MINUTE_US, importance=0.3, state=state)
    add(fold, "late-important", at=NOW - 30 * 24 * HOUR_US - 5 * MINUTE_US, importance=0.6, state=state)
    result = run(fold, state, now=NOW)  # the same time: only the late traces' own timelines are run
    stamps = {(type(x.event).__name__, x.event.trace_id): x.ts_us for x in result.decisions if hasattr(x.event, "trace_id")}
    encoded = NOW - 30 * 24 * HOUR_US - 5 * MINUTE_US
    # Small talk falls below 0.05 three hours after it was said, and is pruned then, not at the present.
    assert stamps[("TracePruned", "late-small-talk")] == encoded + 5 * MINUTE_US + 3 * HOUR_US
    # The important one is reviewed when each review falls due (1 h, then 2 h, 4 h, ... later), and survives.
    reviews = sorted(x.ts_us for x in result.decisions
                     if isinstance(x.event, TraceReinforced) and x.event.trace_id == "late-important")
    assert reviews[:3] == [encoded + 5 * MINUTE_US + h * HOUR_US for h in (1, 3, 7)]
    assert fold.book.traces["late-important"].active and result.late == result.runs > 3


def test_a_year_of_silence_costs_the_reviews_that_fell_due_not_an_hourly_run_each():
    """Issue 13, finding 5 / issue 11: a month-long gap ran every hour and then pruned everything at once."""
    state = c.ConsolidationState()
    fold = TraceFold("a")
    for i in range(10):
        add(fold, f"kept{i}", at=NOW + i * MINUTE_US, importance=0.6, state=state)
        add(fold, f"chat{i}", at=NOW + i * MINUTE_US, importance=0.2, state=state)
    result = run(fold, state, now=NOW + 365 * 24 * HOUR_US)
    assert result.runs < 40  # boundaries with work: about one per doubling of the review interval, not 8,760
    assert all(fold.book.traces[f"kept{i}"].active for i in range(10))  # reviewed in time, never mass-pruned
    assert not any(fold.book.traces[f"chat{i}"].active for i in range(10))
    pruned_at = {x.ts_us for x in result.decisions if isinstance(x.event, TracePruned)}
    assert pruned_at == {NOW + 3 * HOUR_US}  # small talk went three hours after it was said, not a year later


def test_a_tick_after_late_arrivals_writes_its_own_decisions_too(tmp_path):
    """The work done for late arrivals is reported with the next tick; that tick's own decisions must still be written."""
    from engram.events.control import ClockTick
    from engram.config.home import Home
    from engram.policies.base import PolicyContext
    from engram.policies.consolidator import Consolidator

    policy = Consolidator(PolicyContext(shard=0, home=Home(tmp_path), services={"tasks": TASKS}))

    def rec(seq, ts, event, stream="d"):
        return Recorded(seq=seq, stream=stream, stream_version=seq, agent="a", ts_us=ts, event=event)

    def trace(seq, tid, at, importance):
        return rec(seq, at, encode(trace_id=tid, content=f"memory {tid}", config=AgentConfig(), scope="discussion",
                                   scope_id="d", source_type="user_statement", importance=importance))

    tick = lambda seq, at: rec(seq, at, ClockTick(interval_s=3_600), stream="agent:a")  # noqa: E731
    policy.handle([trace(1, "now", NOW - MINUTE_US, 0.6), tick(2, NOW)])
    late = policy.handle([trace(3, "late", NOW - 30 * 24 * HOUR_US, 0.3)])  # caught up at once, reported later
    assert any(isinstance(e.event, TracePruned) for w in late for e in w.events)
    writes = policy.handle([tick(4, NOW + 10 * HOUR_US)])
    written = [e.event for w in writes for e in w.events]
    assert any(isinstance(e, TraceReinforced) and e.trace_id == "now" for e in written)  # the tick's own review
    (report,) = [e for e in written if type(e).__name__ == "ConsolidationRan"]
    assert report.pruned >= 1 and report.reinforced >= 1 and report.late >= 1


def _late_session(state, fold, vectors, n: int, start: int) -> list:
    """`n` traces of an old discussion arriving one at a time after consolidation ran to NOW (an import), each
    followed by its catch-up; the decisions made."""
    made = []
    for i in range(n):
        add(fold, f"h{i}", at=start + (i + 1) * MINUTE_US, stream="old", content=f"Maya went hiking, trip {i}.",
            importance=0.5, state=state)
        made += c.run("a", fold, state, now_us=state.clock_us, config=AgentConfig(), mood=Pad(), vectors=vectors,
                      summarize=TASKS.summarize_schema, count=False, late=True).decisions
    return made


def test_a_late_discussions_schema_waits_until_the_discussion_has_moved_past_the_boundary():
    # Live, the six hiking traces of one hour are clustered together at the hour's end. Imported after later
    # conversations, they arrive one at a time, each caught up at once: clustering at the 5th arrival would
    # make a schema of the first five and leave the 6th out. The check waits for the discussion's next hour.
    vecs = {f"h{i}": np.array([1, 0.01 * i, 0, 0], dtype=np.float32) for i in range(6)}
    vecs["later"] = np.array([0, 0, 1, 0], dtype=np.float32)
    vecs["now"] = np.array([0, 0, 0, 1], dtype=np.float32)
    vectors = lambda ids, texts: np.stack([vecs[i] / np.linalg.norm(vecs[i]) for i in ids])  # noqa: E731
    fold, state = TraceFold("a"), c.ConsolidationState()
    add(fold, "now", at=NOW - MINUTE_US, stream="new", state=state)
    run(fold, state, vectors=vectors)
    start = NOW - 10 * HOUR_US
    assert not [e for e in _late_session(state, fold, vectors, 6, start) if isinstance(e.event, SchemaCreated)]
    add(fold, "later", at=start + 2 * HOUR_US, stream="old", state=state)
    result = c.run("a", fold, state, now_us=state.clock_us, config=AgentConfig(), mood=Pad(), vectors=vectors,
                   summarize=TASKS.summarize_schema, count=False, late=True)
    (schema,) = events(result, SchemaCreated)
    assert set(schema.member_ids) == {f"h{i}" for i in range(6)}
    made = next(x for x in result.decisions if isinstance(x.event, SchemaCreated))
    assert made.ts_us == start + HOUR_US  # at the boundary it was due, as live


def test_a_waiting_schema_check_runs_at_the_next_tick():
    vecs = {f"h{i}": np.array([1, 0.01 * i, 0, 0], dtype=np.float32) for i in range(6)}
    vecs["now"] = np.array([0, 0, 0, 1], dtype=np.float32)
    vectors = lambda ids, texts: np.stack([vecs[i] / np.linalg.norm(vecs[i]) for i in ids])  # noqa: E731
    fold, state = TraceFold("a"), c.ConsolidationState()
    add(fold, "now", at=NOW - MINUTE_US, stream="new", state=state)
    run(fold, state, vectors=vectors)
    _late_session(state, fold, vectors, 6, NOW - 10 * HOUR_US)
    (schema,) = events(run(fold, state, now=NOW + HOUR_US, vectors=vectors), SchemaCreated)
    assert set(schema.member_ids) == {f"h{i}" for i in range(6)}

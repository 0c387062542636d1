"""The Reflector: the 40,000-token threshold, provenance of the traces it makes, contradictions by personality."""

from __future__ import annotations

import pytest

from engram.config.agent import AgentConfig, Personality
from engram.config.home import Home
from engram.config.recorded import SCOPE_AGENT
from engram.events.background import ObservationNote, ObservationsRecorded, Reflected
from engram.events.cognitive import ConflictResolved, EdgeAdded, TraceEncoded
from engram.events.envelope import Recorded
from engram.events.provenance import LlmCall
from engram.memory.background.conflicts import Side, resolve
from engram.memory.cognitive.encoding import encode
from engram.memory.settings import settings_event
from engram.policies.base import PolicyContext
from engram.policies.reflector import Reflector
from engram.providers.llm.factory import make_tasks

HOUR_US = 3_600 * 1_000_000
T0 = 1_772_438_400 * 1_000_000
LLM = LlmCall(provider="offline", model="offline-heuristic-v1", task="observe", prompt_hash="x")


@pytest.fixture(scope="module")
def services():
    from engram.config.service import ServiceConfig

    config = ServiceConfig()
    return {"config": config, "tasks": make_tasks(config.llm)}


def reflector(services, tmp_path) -> Reflector:
    return Reflector(PolicyContext(shard=0, home=Home(tmp_path), services=services))


def settings(seq: int, threshold: int = 40_000, **personality) -> Recorded:
    cfg = AgentConfig.model_validate({"memory": {"reflector": {"activationTokens": threshold}}, "personality": personality})
    return Recorded(seq=seq, stream="agent:a", stream_version=seq, agent="a", ts_us=T0,
                    event=settings_event(SCOPE_AGENT, "agent.config.json", cfg))


def note(i: int, text: str, *, kind: str = "factual", at: int = T0, seq: int | None = None, importance: float = 0.6,
         entities=("Maya",)) -> ObservationNote:
    seq = seq if seq is not None else 100 + i
    return ObservationNote(note_id=f"n{i}", type=kind, text=text, importance=importance, observed_us=at,
                           entities=tuple(entities), source_seqs=(seq,), source_message_ids=(f"m{seq}",), confidence=0.5)


def recorded(seq: int, notes, ts_us: int = T0) -> Recorded:
    ev = ObservationsRecorded(notes=tuple(notes), first_seq=notes[0].source_seqs[0], last_seq=notes[-1].source_seqs[0],
                              input_tokens=1, output_tokens=1, buffered=False, llm=LLM, scope="discussion", scope_id="d")
    return Recorded(seq=seq, stream="d", stream_version=seq, agent="a", ts_us=ts_us, event=ev)


def of(writes, kind):
    return [e for w in writes for e in w.events if isinstance(e.event, kind)]


def test_the_reflector_waits_until_the_notes_exceed_40000_tokens(services, tmp_path):
    words = "Maya talked about hiking routes in the Alps and the weather in Zurich during spring. "
    big = [note(i, (f"Note {i}: " + words * 60)[:4_000]) for i in range(40)]  # 40 notes x 1,000 tokens
    r = reflector(services, tmp_path)
    assert r.handle([settings(1), recorded(2, big)]) == []  # exactly 40,000 tokens: not past the threshold
    writes = r.handle([recorded(3, [note(99, "Ok.", seq=300)])])  # one more token
    (reflected,) = of(writes, Reflected)
    assert reflected.causation == 3 and reflected.ts_us == T0
    assert reflected.event.threshold == 40_000 and reflected.event.input_tokens == 40_001
    assert set(reflected.event.consumed_note_ids) == {f"n{i}" for i in range(40)} | {"n99"}
    # Consumed notes leave the active log: the next notes start counting from zero.
    assert r.handle([recorded(4, [note(100, "Maya likes tea.", seq=301)])]) == []


def test_reflection_traces_carry_provenance_to_the_notes_and_their_messages(services, tmp_path):
    notes = [
        note(1, "Maya will send the quarterly report to Tom by next Friday.", kind="commitment", seq=11, importance=0.8,
             entities=("Maya", "Tom")),
        note(2, "Maya will send the quarterly report to Tom and Grace by next Friday.", kind="commitment", seq=15,
             importance=0.7, entities=("Maya", "Tom", "Grace")),
        note(3, "Maya loves hiking in the Alps on weekends.", kind="preference", seq=20, entities=("Maya", "Alps")),
    ]
    writes = reflector(services, tmp_path).handle([settings(1, threshold=10), recorded(2, notes)])
    (reflected,) = of(writes, Reflected)
    traces = [e.event for e in of(writes, TraceEncoded)]
    assert [t.trace_id for t in traces] == list(reflected.event.trace_ids)
    merged = next(t for t in traces if t.source_type == "reflection")
    assert merged.source_seqs == (11, 15) and merged.source_message_ids == ("m11", "m15")
    assert merged.trace_type == "prospective" and merged.category == "action_item" and "reflection" in merged.tags
    single = next(t for t in traces if t.source_type == "observation")
    assert single.source_seqs == (20,) and single.scope == "agent"
    notes_of = dict(zip(reflected.event.trace_ids, reflected.event.trace_note_ids))
    assert notes_of[merged.trace_id] == ("n1", "n2")
    assert all(e.causation == 2 and e.event_id.startswith("reflect:") for w in writes for e in w.events)
    assert 0 < reflected.event.output_tokens <= reflected.event.input_tokens


# ---------------------------------------------------------------------------------------------- contradictions


def test_the_guides_conflict_rules():
    old, new = Side("old", T0, 0.9), Side("new", T0 + HOUR_US, 0.6)
    honest, agreeable = Personality(honesty=0.8), Personality(agreeableness=0.8)
    assert resolve(honest, old, new) == resolve(honest, new, old)
    assert (resolve(honest, old, new).how, resolve(honest, old, new).winner) == ("prefer_newer", "new")
    both = resolve(Personality(agreeableness=0.8), old, new)
    assert (both.how, both.loser) == ("keep_both", None)
    assert resolve(Personality(honesty=0.8, agreeableness=0.8), old, new).how == "prefer_newer"  # honesty first
    default = resolve(Personality(), old, new)
    assert (default.how, default.winner, default.loser) == ("prefer_confidence", "old", "new")
    tie = resolve(Personality(), Side("old", T0, 0.7), Side("new", T0 + 1, 0.7))
    assert tie.winner == "new"  # equal confidence: the latest thing said
    at_threshold = resolve(Personality(honesty=0.6, agreeableness=0.6), old, new)
    assert at_threshold.how == "prefer_confidence"  # "> 0.6": exactly 0.6 is not high
    del agreeable


def existing_running_trace() -> Recorded:
    trace = encode(trace_id="t-old", content="Maya loves running in the morning before work.", config=AgentConfig(),
                   scope="agent", scope_id="a", source_type="user_statement", source_seqs=(5,),
                   source_message_ids=("m5",), trace_type="semantic", category="user_preference", importance=0.6,
                   confidence=0.8, entities=("Maya",))
    return Recorded(seq=2, stream="d", stream_version=2, agent="a", ts_us=T0, event=trace)


def reflect_correction(services, tmp_path, **personality):
    correction = note(1, "Actually, Maya doesn't love running in the morning anymore, Maya swims instead.",
                      kind="correction", at=T0 + 24 * HOUR_US, seq=30)
    r = reflector(services, tmp_path)
    writes = r.handle([settings(1, threshold=5, **personality), existing_running_trace(),
                       recorded(3, [correction], ts_us=T0 + 24 * HOUR_US)])
    return r, writes


def test_an_honest_agent_prefers_the_newer_information(services, tmp_path):
    r, writes = reflect_correction(services, tmp_path, honesty=0.8)
    (resolved,) = [e.event for e in of(writes, ConflictResolved)]
    new_trace = of(writes, TraceEncoded)[0].event.trace_id
    assert (resolved.winner, resolved.loser, resolved.resolution) == (new_trace, "t-old", "prefer_newer")
    edges = {(e.event.src, e.event.dst, e.event.kind) for e in of(writes, EdgeAdded)}
    assert {(new_trace, "t-old", "contradicts"), (new_trace, "t-old", "supersedes")} <= edges
    assert not r.folds["a"].book.traces["t-old"].active  # superseded: soft-deleted
    assert of(writes, Reflected)[0].event.superseded == ("t-old",)


def test_an_agreeable_agent_keeps_both_and_records_the_discrepancy(services, tmp_path):
    r, writes = reflect_correction(services, tmp_path, agreeableness=0.8)
    (resolved,) = [e.event for e in of(writes, ConflictResolved)]
    assert resolved.resolution == "keep_both" and resolved.note.startswith("both kept, discrepancy")
    kinds = {e.event.kind for e in of(writes, EdgeAdded)}
    assert "contradicts" in kinds and "supersedes" not in kinds
    book = r.folds["a"].book
    assert book.traces["t-old"].active and book.traces[resolved.winner].active
    assert book.traces["t-old"].contradicted_by == (resolved.winner,)


def test_otherwise_the_higher_confidence_wins(services, tmp_path):
    r, writes = reflect_correction(services, tmp_path)  # neutral personality; the old trace is surer (0.8 > 0.5)
    assert of(writes, ConflictResolved) == []
    (reflected,) = [e.event for e in of(writes, Reflected)]
    assert reflected.superseded == ("n1",)  # the weaker note lost; it stays in the log, marked
    assert r.folds["a"].book.traces["t-old"].active


def test_a_note_restating_an_existing_trace_verifies_it_instead_of_storing_a_copy(services, tmp_path):
    """Auto-ingest already made a trace of the message the note comes from: the reflection keeps one copy."""
    from engram.memory.background.traces import TraceFold

    same = note(1, "Maya loves running in the morning before work.", kind="preference", seq=5)
    new = note(2, "Maya adopted a grey cat called Pixel.", seq=6, entities=("Maya", "Pixel"))
    r = reflector(services, tmp_path)
    writes = r.handle([settings(1, threshold=10), existing_running_trace(), recorded(3, [same, new])])
    (reflected,) = of(writes, Reflected)
    traces = [e.event for e in of(writes, TraceEncoded)]
    assert [t.content for t in traces] == ["Maya adopted a grey cat called Pixel."]
    assert reflected.event.duplicates == ("t-old",) and reflected.event.duplicate_note_ids == (("n1",),)
    assert reflected.event.trace_ids == (traces[0].trace_id,)
    fold = TraceFold("a")
    fold.apply(existing_running_trace())
    fold.apply(Recorded(seq=4, stream="d", stream_version=3, agent="a", ts_us=T0, event=reflected.event))
    assert fold.book.traces["t-old"].verification_count == 1  # the restatement counts as a verification


def test_a_restatement_is_found_however_many_later_traces_name_the_same_person(services, tmp_path):
    """The restated trace is older than the 16 most recent traces naming Maya: the word index still finds it."""
    later = [
        Recorded(seq=10 + i, stream="d", stream_version=10 + i, agent="a", ts_us=T0,
                 event=encode(trace_id=f"t-later-{i}", content=f"Maya mentioned topic number {i} today.",
                              config=AgentConfig(), scope="agent", scope_id="a", source_type="user_statement",
                              source_seqs=(10 + i,), source_message_ids=(f"m{10 + i}",), trace_type="semantic",
                              category="knowledge", importance=0.5, confidence=0.8, entities=("Maya",)))
        for i in range(20)
    ]
    same = note(1, "Maya loves running in the morning before work!", kind="preference", seq=5)
    r = reflector(services, tmp_path)
    writes = r.handle([settings(1, threshold=10), existing_running_trace(), *later, recorded(40, [same])])
    (reflected,) = of(writes, Reflected)
    assert reflected.event.duplicates == ("t-old",) and of(writes, TraceEncoded) == []


def test_a_reflection_waits_until_auto_ingest_has_handled_the_messages_of_its_notes(services, tmp_path):
    """Observed ahead of auto-ingest (an imported history): the reflection runs at the FactsIngested of the
    notes' last message, and then finds the trace auto-ingest made of it."""
    from engram.events.cognitive import FactsIngested
    from engram.events.messages import MessageAppended

    def message(seq: int, text: str) -> Recorded:
        ev = MessageAppended(role="user", content=text, message_id=f"m{seq}", token_estimate=10)
        return Recorded(seq=seq, stream="d", stream_version=seq, agent="a", ts_us=T0, event=ev)

    def ingested(seq: int, source_seq: int, trace_ids=()) -> Recorded:
        ev = FactsIngested(source_seq=source_seq, message_id=f"m{source_seq}", trace_ids=tuple(trace_ids))
        return Recorded(seq=seq, stream="d", stream_version=seq, agent="a", ts_us=T0 + HOUR_US, event=ev)

    running = existing_running_trace()
    running = Recorded(seq=8, stream="d", stream_version=8, agent="a", ts_us=T0, event=running.event)
    notes = [note(1, "Maya loves running in the morning before work.", kind="preference", seq=5),
             note(2, "Maya adopted a grey cat called Pixel.", seq=6, entities=("Maya", "Pixel"))]
    r = reflector(services, tmp_path)
    assert r.handle([settings(1, threshold=10), message(5, "I love running in the morning before work."),
                     message(6, "I adopted a grey cat called Pixel."), recorded(7, notes)]) == []  # nothing ingested yet
    assert r.handle([ingested(9, 5), running]) == []  # message 6 is still waiting for auto-ingest
    writes = r.handle([ingested(10, 6)])
    (reflected,) = of(writes, Reflected)
    assert reflected.causation == 10 and reflected.ts_us == T0 + HOUR_US
    assert reflected.event.duplicates == ("t-old",)  # auto-ingest's trace of message 5, verified
    assert [e.event.content for e in of(writes, TraceEncoded)] == ["Maya adopted a grey cat called Pixel."]


def test_without_auto_ingest_a_reflection_does_not_wait(services, tmp_path):
    from engram.events.messages import MessageAppended

    cfg = AgentConfig.model_validate({"memory": {"reflector": {"activationTokens": 5}, "encoding": {"encodeMessages": False}},
                                      "storage": {"autoIngest": {"enabled": False}}})
    off = Recorded(seq=1, stream="agent:a", stream_version=1, agent="a", ts_us=T0,
                   event=settings_event(SCOPE_AGENT, "agent.config.json", cfg))
    msg = Recorded(seq=5, stream="d", stream_version=5, agent="a", ts_us=T0,
                   event=MessageAppended(role="user", content="I adopted a cat.", message_id="m5", token_estimate=5))
    writes = reflector(services, tmp_path).handle(
        [off, msg, recorded(6, [note(1, "Maya adopted a grey cat called Pixel.", seq=5, entities=("Maya", "Pixel"))])])
    (reflected,) = of(writes, Reflected)
    assert reflected.causation == 6  # nothing will come from auto-ingest: reflected at the threshold crossing

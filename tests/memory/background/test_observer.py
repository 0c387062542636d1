"""The Observer: the 30,000-token threshold, async buffering, dated typed notes, scope, forgetting."""

from __future__ import annotations

import msgspec
import pytest

from engram.config import defaults as d
from engram.config.agent import AgentConfig, ObserverSettings
from engram.config.home import Home
from engram.config.recorded import SCOPE_AGENT
from engram.events.background import ObservationsActivated, ObservationsRecorded
from engram.events.control import DiscussionForgotten
from engram.events.envelope import Recorded
from engram.events.messages import MessageAppended
from engram.memory.background import observer as core
from engram.memory.settings import settings_event
from engram.policies.base import PolicyContext
from engram.policies.observer import Observer
from engram.providers.llm.factory import make_tasks
from engram.providers.llm.types import ChatLine

MINUTE_US = 60 * 1_000_000
T0 = 1_772_438_400 * 1_000_000  # 2026-03-02 08:00 UTC, a Monday


def line(seq: int, tokens: int = 1_000) -> ChatLine:
    return ChatLine(role="user", content="x" * (4 * tokens), seq=seq, ts_us=T0 + seq * MINUTE_US, message_id=f"m{seq}")


def feed(buf: core.Buffer, settings: ObserverSettings, n: int, tokens: int = 1_000, start: int = 1):
    return [(seq, core.add_message(buf, "d", line(seq, tokens), tokens, settings)) for seq in range(start, start + n)]


def test_the_guides_thresholds_are_the_defaults():
    cfg = AgentConfig()
    assert cfg.memory.observer.activation_tokens == 30_000
    assert cfg.memory.reflector.activation_tokens == 40_000
    assert cfg.memory.observer.buffer_tokens == d.OBSERVER_BUFFER_TOKENS == 6_000
    assert cfg.memory.observer.scope == "discussion"
    assert cfg.memory.consolidation.interval_hours == 1
    assert cfg.memory.consolidation.max_traces_per_run == d.CONSOLIDATION_MAX_TRACES_PER_RUN == 500


def test_without_buffering_nothing_is_observed_until_the_unobserved_tokens_exceed_30000():
    buf = core.Buffer(("a", "discussion", "d"))
    steps = feed(buf, ObserverSettings(buffer_tokens=0), 30)
    assert all(s == [] for _, s in steps)  # exactly 30,000 tokens: not past the threshold
    assert buf.unobserved_tokens == 30_000
    (step,) = core.add_message(buf, "d", line(31), 1_000, ObserverSettings(buffer_tokens=0))
    assert isinstance(step, core.Observe) and not step.buffered
    assert (step.first_seq, step.last_seq, step.tokens) == (1, 31, 31_000)
    assert buf.unobserved_tokens == 0


def test_buffering_observes_every_6000_tokens_and_activates_past_30000_without_observing_again():
    buf = core.Buffer(("a", "discussion", "d"))
    settings = ObserverSettings()
    steps = feed(buf, settings, 30)
    observed = [(seq, s) for seq, ss in steps for s in ss]
    # An increment each time 6,000 tokens are pending: messages 1-6, 7-12, ... 25-30, all buffered.
    assert [(s.first_seq, s.last_seq, s.buffered) for _, s in observed] == [
        (1, 6, True), (7, 12, True), (13, 18, True), (19, 24, True), (25, 30, True)]
    assert buf.unobserved_tokens == 30_000  # buffered, not yet in the log: the threshold is not crossed yet
    crossing = core.add_message(buf, "d", line(31), 1_000, settings)
    (activate,) = crossing  # past 30,000: activation only, no LLM work at the crossing
    assert isinstance(activate, core.Activate)
    assert (activate.through_seq, len(activate.increments), activate.unobserved_tokens, activate.threshold) == (30, 5, 31_000, 30_000)
    # Message 31 waits for the next increment; it is observed once, with 32-36.
    later = [s for _, ss in feed(buf, settings, 5, start=32) for s in ss]
    assert [(s.first_seq, s.last_seq) for s in later] == [(31, 36)]


def test_a_buffer_larger_than_the_threshold_observes_at_the_threshold():
    buf = core.Buffer(("a", "discussion", "d"))
    steps = [s for _, ss in feed(buf, ObserverSettings(activation_tokens=3_000, buffer_tokens=10_000), 4) for s in ss]
    assert [(s.first_seq, s.last_seq, s.buffered) for s in steps] == [(1, 4, False)]


# ---------------------------------------------------------------------------------------------- the policy


@pytest.fixture(scope="module")
def services():
    from engram.config.service import ServiceConfig

    config = ServiceConfig()
    return {"config": config, "tasks": make_tasks(config.llm)}


def settings_rec(seq: int, agent: str = "a", ts_us: int = T0, *, observer: dict | None = None,
                 memory: dict | None = None, personality: dict | None = None) -> Recorded:
    memory = dict(memory or {})
    if observer is not None:
        memory["observer"] = observer
    cfg = AgentConfig.model_validate({"memory": memory, "personality": personality or {}})
    return Recorded(seq=seq, stream=f"agent:{agent}", stream_version=seq, agent=agent, ts_us=ts_us,
                    event=settings_event(SCOPE_AGENT, "agent.config.json", cfg))


def message(seq: int, content: str, stream: str = "d", agent: str = "a", role: str = "user") -> Recorded:
    ev = MessageAppended(role=role, content=content, message_id=f"m{seq}", token_estimate=max(1, -(-len(content) // 4)),
                         name="Maya" if role == "user" else None)
    return Recorded(seq=seq, stream=stream, stream_version=seq, agent=agent, ts_us=T0 + seq * MINUTE_US, event=ev)


TALK = [
    "I promised Tom I'll send the quarterly report by next Friday, the deadline is firm.",
    "I'm so thrilled about the promotion, I honestly cried a little when I heard!",
    "I really love hiking in the Alps on weekends, it helps me relax.",
    "Actually, my sister Ana lives in Porto now, not in Lisbon.",
    "What if we turned the balcony into a small garden with herbs and a pond?",
    "My brother Jonas works at Helix Labs in Zurich as a data engineer since 2019.",
]


def conversation(n: int, start: int = 2, stream: str = "d", agent: str = "a") -> list[Recorded]:
    return [message(start + i, TALK[i % len(TALK)] + f" (turn {i})", stream, agent) for i in range(n)]


def events(writes, kind):
    return [(w, e) for w in writes for e in w.events if isinstance(e.event, kind)]


def observer(services, tmp_path) -> Observer:
    return Observer(PolicyContext(shard=0, home=Home(tmp_path), services=services))


def test_the_observer_records_buffered_increments_then_one_activation_caused_by_the_crossing_message(services, tmp_path):
    batch = [settings_rec(1, observer={"activationTokens": 300, "bufferTokens": 100})] + conversation(24)
    writes = observer(services, tmp_path).handle(batch)
    recorded = [e for _, e in events(writes, ObservationsRecorded)]
    activated = [e for _, e in events(writes, ObservationsActivated)]
    assert recorded and all(r.event.buffered for r in recorded)
    # Every increment holds at least bufferTokens, and no message is observed twice.
    assert all(r.event.input_tokens >= 100 for r in recorded)
    spans = [(r.event.first_seq, r.event.last_seq) for r in recorded]
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))
    first = activated[0]
    # Before the first activation every message is buffered or pending: the crossing is the first message at
    # which the conversation's tokens exceed 300.
    running, crossing = 0, None
    for m in batch[1:]:
        running += m.event.token_estimate
        if running > 300:
            crossing = m.seq
            break
    assert first.causation == crossing and first.event.unobserved_tokens > 300 and first.event.threshold == 300
    assert first.event.message_tokens == sum(r.event.input_tokens for r in recorded if r.event.last_seq <= first.event.through_seq)
    assert first.event_id == f"activate:discussion:d:{first.event.through_seq}"
    # Events take the event time of their messages; ids are deterministic (a second run decides the same).
    assert all(r.ts_us == T0 + r.event.last_seq * MINUTE_US and r.causation == r.event.last_seq for r in recorded)
    again = observer(services, tmp_path).handle(batch)
    strip = lambda ws: [(w.stream, e.event_id, msgspec.structs.replace(e.event, llm=None) if hasattr(e.event, "llm") else e.event)  # noqa: E731
                        for w in ws for e in w.events]
    assert strip(writes) == strip(again)


def test_notes_are_dated_typed_and_point_back_to_their_messages(services, tmp_path):
    # Each message crosses a 10-token threshold on its own: each is observed alone.
    batch = [settings_rec(1, observer={"activationTokens": 10, "bufferTokens": 0})] + conversation(6)
    writes = observer(services, tmp_path).handle(batch)
    notes = [n for _, e in events(writes, ObservationsRecorded) for n in e.event.notes]
    types = {n.type for n in notes}
    assert {"commitment", "emotional", "preference", "correction"} <= types
    by_seq = {m.seq: m for m in batch[1:]}
    for n in notes:
        assert n.type in ("factual", "emotional", "commitment", "preference", "creative", "correction")
        assert 0 <= n.importance <= 1
        (seq,) = n.source_seqs
        assert n.observed_us == by_seq[seq].ts_us and n.source_message_ids == (f"m{seq}",)
    friday = next(n for n in notes if n.type == "commitment")
    assert friday.refers_to == "2026-03-13"  # "next Friday" said on Monday 2 March 2026: the Friday of next week


def test_personality_shifts_what_the_observer_notices(services, tmp_path):
    text = "I feel anxious, I promised Tom the report."  # as much emotion as commitment
    kinds = {}
    for trait in ("emotionality", "conscientiousness"):
        batch = [settings_rec(1, personality={trait: 0.9}, memory={"observer": {"activationTokens": 10, "bufferTokens": 0}}),
                 message(2, text)]
        writes = observer(services, tmp_path).handle(batch)
        kinds[trait] = [n.type for _, e in events(writes, ObservationsRecorded) for n in e.event.notes]
    assert kinds["emotionality"] == ["emotional"]
    assert kinds["conscientiousness"] == ["commitment"]


def test_agent_scope_keeps_one_log_across_discussions_and_records_notes_in_each_discussion(services, tmp_path):
    cfg = {"observer": {"activationTokens": 200, "bufferTokens": 60, "scope": "agent"}}
    talk = conversation(6, start=2, stream="d1") + conversation(6, start=8, stream="d2")
    writes = observer(services, tmp_path).handle([settings_rec(1, memory=cfg)] + talk)
    recorded = events(writes, ObservationsRecorded)
    assert {w.stream for w, _ in recorded} == {"d1", "d2"}
    assert all(e.event.scope == "agent" and e.event.scope_id == "a" for _, e in recorded)
    (w, act), *_ = events(writes, ObservationsActivated)
    assert w.stream == "agent:a" and act.event.scope == "agent" and act.causation is None


def test_a_lower_threshold_in_new_settings_activates_what_is_buffered(services, tmp_path):
    obs = observer(services, tmp_path)
    first = obs.handle([settings_rec(1, observer={"activationTokens": 30_000, "bufferTokens": 60})] + conversation(10))
    assert events(first, ObservationsRecorded) and not events(first, ObservationsActivated)
    later = obs.handle([settings_rec(20, ts_us=T0 + 30 * MINUTE_US, observer={"activationTokens": 100, "bufferTokens": 60})])
    ((_, act),) = events(later, ObservationsActivated)
    assert act.causation == 20 and act.ts_us == T0 + 30 * MINUTE_US


def test_forgetting_a_discussion_drops_its_unobserved_messages(services, tmp_path):
    obs = observer(services, tmp_path)
    obs.handle([settings_rec(1, observer={"activationTokens": 10_000, "bufferTokens": 5_000})] + conversation(8))
    assert obs.buffers[("a", "discussion", "d")].pending_tokens > 0
    forget = Recorded(seq=50, stream="agent:a", stream_version=2, agent="a", ts_us=T0,
                      event=DiscussionForgotten(discussion_id="d"))
    obs.handle([forget])
    assert ("a", "discussion", "d") not in obs.buffers


def test_the_observer_resumes_from_its_snapshot_without_observing_twice(services, tmp_path):
    cfg = settings_rec(1, observer={"activationTokens": 400, "bufferTokens": 100})
    talk = conversation(20)
    whole = observer(services, tmp_path).handle([cfg] + talk)
    first = observer(services, tmp_path)
    part = first.handle([cfg] + talk[:9])
    resumed = observer(services, tmp_path)
    resumed.load_snapshot(first.snapshot())
    rest = resumed.handle(talk[9:])
    ids = lambda ws: [e.event_id for w in ws for e in w.events]  # noqa: E731
    assert ids(part) + ids(rest) == ids(whole)

"""Clock ticks: hourly in event time (imported history), and from the wall clock for live agents."""

from __future__ import annotations

from engram.config.agent import AgentConfig
from engram.config.home import Home
from engram.config.recorded import SCOPE_AGENT
from engram.events.control import ClockTick
from engram.events.envelope import Recorded
from engram.events.messages import MessageAppended
from engram.memory.background import clock
from engram.memory.cognitive.encoding import encode
from engram.memory.settings import settings_event
from engram.policies.base import PolicyContext
from engram.policies.clock import ClockTicker
from engram.policies.host import PolicyHost

HOUR_US = 3_600 * 1_000_000
MINUTE_US = 60 * 1_000_000
T9 = 1_772_442_000 * 1_000_000  # 2026-03-02 09:00 UTC


def msg(seq: int, ts_us: int, agent: str = "a") -> Recorded:
    ev = MessageAppended(role="user", content="hi", message_id=f"m{seq}", token_estimate=1)
    return Recorded(seq=seq, stream="d", stream_version=seq, agent=agent, ts_us=ts_us, event=ev)


def trace(seq: int, ts_us: int, agent: str = "a") -> Recorded:
    """A memory encoded at `ts_us`: the agent's clock follows these."""
    ev = encode(trace_id=f"t{seq}", content="hi", config=AgentConfig(), scope="discussion", scope_id="d",
                source_type="user_statement")
    return Recorded(seq=seq, stream="d", stream_version=seq, agent=agent, ts_us=ts_us, event=ev)


def ticks(writes) -> list[tuple[str, int, str, str]]:
    return [(w.stream, e.ts_us, e.event.reason, e.event_id) for w in writes for e in w.events if isinstance(e.event, ClockTick)]


def ticker(tmp_path) -> ClockTicker:
    return ClockTicker(PolicyContext(shard=0, home=Home(tmp_path)))


def test_time_passing_hour_boundaries_in_event_time_gets_one_tick_at_the_latest(tmp_path):
    t = ticker(tmp_path)
    assert t.handle([msg(1, T9 + 16 * MINUTE_US), trace(2, T9 + 17 * MINUTE_US)]) == []  # the first message starts the clock
    # Messages do not move it: ticks follow the traces made from them, once those are recorded.
    assert t.handle([msg(3, T9 + 5 * HOUR_US)]) == []
    writes = t.handle([trace(4, T9 + 40 * MINUTE_US), trace(5, T9 + 3 * HOUR_US + 5 * MINUTE_US)])
    # Three boundaries passed: one tick, at the latest, saying where the previous one was.
    assert ticks(writes) == [("agent:a", T9 + 3 * HOUR_US, "event-time", f"tick:a:{T9 + 3 * HOUR_US}")]
    assert [e.event.since_us for w in writes for e in w.events] == [T9]
    assert all(e.causation is None and e.event.interval_s == 3_600 for w in writes for e in w.events)
    # A memory dated in the past does not move the clock back; the same hour is never ticked twice.
    assert t.handle([trace(6, T9), trace(7, T9 + 3 * HOUR_US + 50 * MINUTE_US)]) == []


def test_reflection_traces_move_the_clock_only_of_an_agent_without_auto_ingest(tmp_path):
    reflected = lambda seq, ts, agent: Recorded(  # noqa: E731
        seq=seq, stream="d", stream_version=seq, agent=agent, ts_us=ts,
        event=encode(trace_id=f"r{seq}", content="x", config=AgentConfig(), scope="agent", scope_id=agent,
                     source_type="reflection"))
    no_ingest = AgentConfig.model_validate({"storage": {"autoIngest": {"enabled": False}},
                                            "memory": {"encoding": {"encodeMessages": False}}})
    settings = Recorded(seq=1, stream="agent:b", stream_version=1, agent="b", ts_us=T9,
                        event=settings_event(SCOPE_AGENT, "agent.config.json", no_ingest))
    t = ticker(tmp_path)
    writes = t.handle([settings, msg(2, T9, "a"), msg(3, T9, "b"), reflected(4, T9 + 2 * HOUR_US, "a"),
                       reflected(5, T9 + 2 * HOUR_US, "b")])
    assert [(s, ts) for s, ts, _, _ in ticks(writes)] == [("agent:b", T9 + 2 * HOUR_US)]


def test_a_year_of_silence_is_one_tick_not_thousands(tmp_path):
    """Issue 13, finding 5: one undated message after a dated history brought 2,208 ticks."""
    t = ticker(tmp_path)
    t.handle([trace(1, T9)])
    writes = t.handle([trace(2, T9 + 400 * 24 * HOUR_US)])
    assert [(ts, e) for _, ts, _, e in ticks(writes)] == [(T9 + 400 * 24 * HOUR_US, f"tick:a:{T9 + 400 * 24 * HOUR_US}")]
    assert [e.event.since_us for w in writes for e in w.events] == [T9]


def test_the_interval_follows_the_agents_configuration(tmp_path):
    cfg = AgentConfig.model_validate({"memory": {"consolidation": {"intervalHours": 0.5}}})
    settings = Recorded(seq=1, stream="agent:a", stream_version=1, agent="a", ts_us=T9,
                        event=settings_event(SCOPE_AGENT, "agent.config.json", cfg))
    t = ticker(tmp_path)
    writes = t.handle([settings, trace(2, T9), trace(3, T9 + 40 * MINUTE_US), trace(4, T9 + HOUR_US)])
    assert [ts for _, ts, _, _ in ticks(writes)] == [T9 + 30 * MINUTE_US, T9 + HOUR_US]
    assert {e.event.interval_s for w in writes for e in w.events} == {1_800}


def test_live_agents_are_ticked_by_the_wall_clock_imported_ones_are_not(tmp_path):
    t = ticker(tmp_path)
    t.handle([msg(1, T9 + 50 * MINUTE_US, agent="live"), trace(2, T9 + 50 * MINUTE_US, agent="live"),
              msg(3, T9 - 30 * 24 * HOUR_US, agent="imported"), trace(4, T9 - 30 * 24 * HOUR_US, agent="imported")])
    writes = t.on_wall_clock(T9 + 2 * HOUR_US + MINUTE_US)
    assert ticks(writes) == [("agent:live", T9 + 2 * HOUR_US, "wall-clock", f"tick:live:{T9 + 2 * HOUR_US}")]
    # The event-time ticker would give a later message's boundaries the same ids: each hour is ticked once.
    assert t.handle([msg(5, T9 + 2 * HOUR_US + 30 * MINUTE_US, agent="live"),
                     trace(6, T9 + 2 * HOUR_US + 30 * MINUTE_US, agent="live")]) == []
    # A day after its last message an agent is no longer live.
    assert t.on_wall_clock(T9 + 27 * HOUR_US) == []


def test_the_actor_shell_gives_the_wall_clock_to_the_policy_host(tmp_path):
    appended = []
    t = ticker(tmp_path)
    host = PolicyHost([t], read=lambda *a, **k: [], append=appended.extend, head=lambda: 0, state_dir=None)
    t.handle([msg(1, T9 + 59 * MINUTE_US), trace(2, T9 + 59 * MINUTE_US)])
    assert host.wall_clock(T9 + HOUR_US + 1) == 1
    assert [e.ts_us for w in appended for e in w.events] == [T9 + HOUR_US]
    assert host.wall_clock(T9 + HOUR_US + 2) == 0


def test_the_latest_boundary_crossed_between_two_times():
    every = clock.interval_us(1.0)
    assert clock.crossed(T9, T9, every) is None
    assert clock.crossed(T9 - 1, T9, every) == T9
    assert clock.crossed(T9, T9 + 3 * HOUR_US - 1, every) == T9 + 2 * HOUR_US

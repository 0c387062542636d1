"""Clock ticks: when consolidation runs, in event time, so that replay reproduces it.

Each agent has its own clock (imported histories of different agents live in different years).
A tick says "the agent's time has reached this interval boundary" (every hour by default, from the
epoch, UTC): consolidation then does everything due through it, each thing at its own boundary
(`engram.memory.background.consolidation`), and nothing at the idle boundaries in between. So one tick
stands for all the boundaries crossed since the previous one:

- **event time**: the clock starts at the agent's first message and follows the event time of the
  traces made from its conversation, as they are recorded (auto-ingest's, in message order; for an
  agent without auto-ingest, the Reflector's): a trace encoded past one or more boundaries since the
  last tick brings one tick, at the latest boundary it passed (`since_us` says where the previous one
  was). A tick is recorded after the traces encoded before it (consolidation at that time sees them).
  A year of silence is one tick, not 8,760: the work it brings is what fell due, not the hours.
- **wall-clock time**: for live agents (last message within LIVE_AGENT_WINDOW_S of now), the actor
  shell passes the current time and a boundary it passed gets a tick, even in silence.

Both record `ClockTick` events with the boundary as event time and the same deterministic event id
per (agent, boundary), so a boundary is ticked once whoever saw it first. Starting the clock ticks
nothing (no boundary was crossed while the agent existed).
"""

from __future__ import annotations

from dataclasses import dataclass

US_PER_HOUR = 3_600 * 1_000_000


def interval_us(interval_hours: float) -> int:
    return max(1, int(round(interval_hours * US_PER_HOUR)))


def boundary_at_or_before(ts_us: int, every_us: int) -> int:
    return (ts_us // every_us) * every_us


def crossed(after_us: int, through_us: int, every_us: int) -> int | None:
    """The latest interval boundary b with after_us < b <= through_us, or None (no boundary crossed)."""
    last = boundary_at_or_before(through_us, every_us)
    return last if last > after_us else None


def tick_id(agent: str, boundary_us: int) -> str:
    return f"tick:{agent}:{boundary_us}"


@dataclass
class AgentClock:
    last_tick_us: int | None = None  # the latest boundary ticked, or where the clock started (None: not yet)
    last_message_us: int = 0  # for liveness


def on_memory(clock: AgentClock | None, ts_us: int, every_us: int) -> tuple[AgentClock, list[tuple[int, int]]]:
    """The agent's clock after a trace encoded at `ts_us`, and the tick to record (event time):
    [(boundary, the previous tick)], or [] when no boundary was crossed."""
    clock = clock or AgentClock()
    if clock.last_tick_us is None:
        clock.last_tick_us = boundary_at_or_before(ts_us, every_us)
        return clock, []
    b = crossed(clock.last_tick_us, ts_us, every_us)
    if b is None:
        return clock, []
    since, clock.last_tick_us = clock.last_tick_us, b
    return clock, [(b, since)]


def on_message(clock: AgentClock | None, ts_us: int, every_us: int) -> AgentClock:
    """A message: the agent exists from `ts_us` (its clock starts) and is in use then (liveness)."""
    clock = clock or AgentClock()
    if clock.last_tick_us is None:
        clock.last_tick_us = boundary_at_or_before(ts_us, every_us)
    clock.last_message_us = max(clock.last_message_us, ts_us)
    return clock


def on_wall_clock(clock: AgentClock, now_us: int, every_us: int, live_window_us: int) -> list[tuple[int, int]]:
    """The tick to record at wall-clock `now_us` for a live agent, [(boundary, previous tick)] or [] (none for
    an idle or imported agent, or when no boundary passed)."""
    if clock.last_tick_us is None or now_us - clock.last_message_us > live_window_us:
        return []
    b = crossed(clock.last_tick_us, now_us, every_us)
    if b is None:
        return []
    since, clock.last_tick_us = clock.last_tick_us, b
    return [(b, since)]


def on_tick(clock: AgentClock | None, tick_us: int) -> None:
    """A tick recorded by anyone moves the clock (so neither ticker ticks that boundary again)."""
    if clock is not None:
        clock.last_tick_us = tick_us if clock.last_tick_us is None else max(clock.last_tick_us, tick_us)

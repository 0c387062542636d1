"""Clock ticks: when consolidation runs, in event time, so that replay reproduces it.

Each agent has its own clock (imported histories of different agents live in different years).
A tick is due at every interval boundary (every hour by default, from the epoch, UTC) that the
agent's time passes:

- **event time**: the clock starts at the agent's first message and follows the event time of the
  traces made from its conversation, as they are recorded (auto-ingest's, in message order; for an
  agent without auto-ingest, the Reflector's): a trace encoded past one or more boundaries since the
  last tick brings a tick for each of them, so an imported history is consolidated hour by hour, as
  it would have been live, and a tick is recorded after the traces encoded before it (consolidation
  at that hour sees them). After a long silence, only the latest MAX_CATCH_UP_TICKS boundaries;
- **wall-clock time**: for live agents (last message within LIVE_AGENT_WINDOW_S of now), the actor
  shell passes the current time and the boundaries it passed get their ticks, even in silence.

Both record `ClockTick` events with the boundary as event time and the same deterministic event id
per (agent, boundary), so a boundary is ticked once whoever saw it first. Starting the clock ticks
nothing (no boundary was crossed while the agent existed).
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.config import defaults as d

US_PER_HOUR = 3_600 * 1_000_000


def interval_us(interval_hours: float) -> int:
    return max(1, int(round(interval_hours * US_PER_HOUR)))


def boundary_at_or_before(ts_us: int, every_us: int) -> int:
    return (ts_us // every_us) * every_us


def boundaries(after_us: int, through_us: int, every_us: int, cap: int = d.MAX_CATCH_UP_TICKS) -> list[int]:
    """Interval boundaries b with after_us < b <= through_us, the latest `cap` of them."""
    last = boundary_at_or_before(through_us, every_us)
    if last <= after_us:
        return []
    first = boundary_at_or_before(after_us, every_us) + every_us
    count = (last - first) // every_us + 1
    if count > cap:
        first = last - (cap - 1) * every_us
    return list(range(first, last + 1, every_us))


def tick_id(agent: str, boundary_us: int) -> str:
    return f"tick:{agent}:{boundary_us}"


@dataclass
class AgentClock:
    last_tick_us: int | None = None  # the latest boundary ticked, or where the clock started (None: not yet)
    last_message_us: int = 0  # for liveness


def on_memory(clock: AgentClock | None, ts_us: int, every_us: int) -> tuple[AgentClock, list[int]]:
    """The agent's clock after a trace encoded at `ts_us`, and the boundaries to tick (event time)."""
    clock = clock or AgentClock()
    if clock.last_tick_us is None:
        clock.last_tick_us = boundary_at_or_before(ts_us, every_us)
        return clock, []
    due = boundaries(clock.last_tick_us, ts_us, every_us)
    if due:
        clock.last_tick_us = due[-1]
    return clock, due


def on_message(clock: AgentClock | None, ts_us: int, every_us: int) -> AgentClock:
    """A message: the agent exists from `ts_us` (its clock starts) and is in use then (liveness)."""
    clock = clock or AgentClock()
    if clock.last_tick_us is None:
        clock.last_tick_us = boundary_at_or_before(ts_us, every_us)
    clock.last_message_us = max(clock.last_message_us, ts_us)
    return clock


def on_wall_clock(clock: AgentClock, now_us: int, every_us: int, live_window_us: int) -> list[int]:
    """The boundaries to tick at wall-clock `now_us`, for a live agent (none for an idle or imported one)."""
    if clock.last_tick_us is None or now_us - clock.last_message_us > live_window_us:
        return []
    due = boundaries(clock.last_tick_us, now_us, every_us)
    if due:
        clock.last_tick_us = due[-1]
    return due


def on_tick(clock: AgentClock | None, tick_us: int) -> None:
    """A tick recorded by anyone moves the clock (so neither ticker ticks that boundary again)."""
    if clock is not None:
        clock.last_tick_us = tick_us if clock.last_tick_us is None else max(clock.last_tick_us, tick_us)

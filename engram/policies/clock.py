"""The ClockTicker: records the `ClockTick` events that drive consolidation (`engram.memory.background.clock`).

In event time, from the traces made from the conversation as they reach the log (one tick per advance of the
agent's time past an interval boundary, at the latest boundary passed: consolidation then does what fell due
since the previous tick, each at its own boundary, as it would have been live): auto-ingest's (and tool lessons'), which the auto-ingest
actor records in message order, or, for an agent without auto-ingest, the Reflector's. The Reflector's
traces do not drive the clock otherwise: they are dated at the activation that caused them and can reach
the log before auto-ingest's traces of the hours before, which must be in the log before those hours'
ticks. In wall-clock time, from `on_wall_clock(now_us)`, which the actor shell calls with the current
time (`engram.policies.host.PolicyHost.wall_clock`) for agents that are live (their messages say so).
It runs in the consolidation actor after the Reflector, before the Consolidator. Ticks go to
the agent's stream `agent:<agent>` with the boundary as event time and one id per (agent, boundary),
so whichever ticker sees a boundary first records it, once. Ticks have no causation: time caused them,
and forgetting one discussion must not undo the consolidation of the others.
"""

from __future__ import annotations

from typing import Any

from engram.config import defaults as d
from engram.events.cognitive import TraceEncoded
from engram.events.control import AgentForgotten, ClockTick
from engram.events.envelope import NewEvent, Recorded, Write
from engram.kernel.ids import agent_stream
from engram.memory.background import clock
from engram.policies.background_base import BackgroundPolicy
from engram.policies.base import PolicyContext

EVENT_TIME, WALL_CLOCK = "event-time", "wall-clock"
# Traces made from the conversation as it is recorded (auto-ingest, tool-failure lessons), and the Reflector's.
CONVERSATION_SOURCES = frozenset({"user_statement", "agent_inference", "tool_result"})
REFLECTION_SOURCES = frozenset({"observation", "reflection"})


class ClockTicker(BackgroundPolicy):
    name = "clock"
    interests = frozenset({"MessageAppended", "TraceEncoded", "ClockTick", "SettingsChanged", "AgentForgotten"})

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.clocks: dict[str, clock.AgentClock] = {}

    def _drivers(self, agent: str) -> frozenset[str]:
        """Source types of the traces that move this agent's clock."""
        cfg = self.config_of(agent)
        ingesting = cfg.storage.auto_ingest.enabled or cfg.memory.encoding.encode_messages
        return CONVERSATION_SOURCES if ingesting else REFLECTION_SOURCES

    def _every_us(self, agent: str) -> tuple[int, bool, bool]:
        c = self.config_of(agent).memory.consolidation
        return clock.interval_us(c.interval_hours), c.enabled, c.wall_clock

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes: list[Write] = []
        for rec in batch:
            e = rec.event
            if rec.type == "SettingsChanged":
                self.settings.apply(rec)
            elif isinstance(e, AgentForgotten):
                self.clocks.pop(e.agent_id, None)
                self.forget_agent(e.agent_id)
            elif not self.owns(rec.agent):
                continue
            elif isinstance(e, ClockTick):
                clock.on_tick(self.clocks.get(rec.agent), rec.ts_us)
            elif rec.type == "MessageAppended":
                every, _, _ = self._every_us(rec.agent)
                self.clocks[rec.agent] = clock.on_message(self.clocks.get(rec.agent), rec.ts_us, every)
            elif isinstance(e, TraceEncoded) and e.source_type in self._drivers(rec.agent):
                every, enabled, _ = self._every_us(rec.agent)
                self.clocks[rec.agent], due = clock.on_memory(self.clocks.get(rec.agent), rec.ts_us, every)
                if enabled and due:
                    writes.append(self._ticks(rec.agent, due, every, EVENT_TIME))
        return writes

    def on_wall_clock(self, now_us: int) -> list[Write]:
        """Ticks for the boundaries wall-clock `now_us` has passed, for live agents (time from the shell)."""
        writes = []
        for agent in sorted(self.clocks):
            every, enabled, wall = self._every_us(agent)
            if not (enabled and wall):
                continue
            due = clock.on_wall_clock(self.clocks[agent], now_us, every, d.LIVE_AGENT_WINDOW_S * 1_000_000)
            if due:
                writes.append(self._ticks(agent, due, every, WALL_CLOCK))
        return writes

    def _ticks(self, agent: str, boundaries: list[tuple[int, int]], every_us: int, reason: str) -> Write:
        interval_s = every_us // 1_000_000
        return Write(agent_stream(agent), agent, tuple(
            NewEvent(event=ClockTick(interval_s=interval_s, reason=reason, since_us=since), ts_us=b,
                     event_id=clock.tick_id(agent, b))
            for b, since in boundaries
        ))

    def state(self) -> Any:
        return {"settings": self.settings.state(), "clocks": self.clocks}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            self.clocks = state["clocks"]

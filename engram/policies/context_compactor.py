"""The ContextCompactor policy: keeps each discussion's context within its window (infinite context).

A logical actor per discussion, placed on the `context` pool by consistent hashing (one mailbox per
discussion, so its compactions are serial). After every message — and when the agent's recorded
settings change — it folds the discussion's context (`engram.memory.context.chain`) and, when the context
passes `compactionThreshold` of `contextWindowTokens` (`engram.memory.context.rules`), compacts the turns
due with the recorded strategy (`engram.memory.context.compactor`). Decisions depend only on the log: event
time, recorded settings, and the messages and Observer notes the log holds before the trigger.

Appended to the discussion's stream, with the trigger's event time and `causation` = its seq: the
hybrid reflection's `TraceEncoded` events, then one `ContextCompacted` per node (ids
`compaction:<discussion>:<node id>`). A trigger whose compaction the log already holds (a restart
that lost its snapshot, a re-handled batch) adopts it instead of calling the LLM again. State of a
discussion (or agent) is dropped when it is forgotten.
"""

from __future__ import annotations

import time
from typing import Any

from engram.config.recorded import SCOPE_AGENT
from engram.events.background import ContextCompacted, ObservationsRecorded
from engram.events.cognitive import MoodChanged
from engram.events.control import AgentForgotten, DiscussionForgotten, SettingsChanged
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import MessageAppended
from engram.kernel.placement import owner
from engram.memory.cognitive import llm_bridge
from engram.memory.cognitive.personality import Pad
from engram.memory.context import hybrid, rules
from engram.memory.context.chain import DiscussionContext
from engram.memory.context.compactor import Compactor
from engram.memory.settings import SettingsView
from engram.policies.base import Policy, PolicyContext

GROUP = "context"


def compaction_event_id(discussion: str, node_id: str) -> str:
    return f"compaction:{discussion}:{node_id}"


class ContextCompactor(Policy):
    name = "context-compactor"
    interests = frozenset(
        {
            "MessageAppended", "ContextCompacted", "SettingsChanged", "MoodChanged", "DiscussionForgotten",
            "AgentForgotten",
        }
    )

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.settings = SettingsView()
        self.discussions: dict[tuple[str, str], DiscussionContext] = {}  # (agent, discussion id) -> context
        self.moods: dict[str, Pad] = {}
        self._tasks = None
        self.clock = time.perf_counter  # measures durations only

    @property
    def tasks(self):
        if self._tasks is None:
            self._tasks = self.ctx.tasks
        return self._tasks

    def mine(self, discussion: str) -> bool:
        return owner(discussion, self.ctx.members) == self.ctx.member

    # ------------------------------------------------------------------ handling

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes: list[Write] = []
        for rec in batch:
            ev = rec.event
            if isinstance(ev, DiscussionForgotten):
                self.discussions.pop((rec.agent, ev.discussion_id), None)
            elif isinstance(ev, AgentForgotten):
                for d in [d for d, c in self.discussions.items() if c.agent == ev.agent_id]:
                    del self.discussions[d]
                self.moods.pop(ev.agent_id, None)
            elif isinstance(ev, SettingsChanged):
                self.settings.apply(rec)
                if ev.scope == SCOPE_AGENT and rec.stream.startswith("agent:"):
                    # A lowered window or threshold applies at once, not at the next message.
                    for c in [c for c in self.discussions.values() if c.agent == rec.agent]:
                        writes += self._maybe_compact(c, rec)
            elif isinstance(ev, MoodChanged):
                self.moods[rec.agent] = Pad(ev.valence, ev.arousal, ev.dominance)
            elif rec.stream.startswith("agent:") or not self.mine(rec.stream):
                continue
            elif isinstance(ev, MessageAppended):
                c = self._context(rec)
                c.add_message(rec.seq, ev.token_estimate)
                writes += self._maybe_compact(c, rec)
            elif isinstance(ev, ContextCompacted):
                self._context(rec).apply(ev, rec.ts_us)  # ours coming back (no-op), or one to adopt
        return writes

    def _context(self, rec: Recorded) -> DiscussionContext:
        c = self.discussions.get((rec.agent, rec.stream))
        if c is None:
            c = self.discussions[(rec.agent, rec.stream)] = DiscussionContext(rec.agent, rec.stream)
        return c

    def _maybe_compact(self, c: DiscussionContext, trigger: Recorded) -> list[Write]:
        config = self.settings.agent_config(c.agent)
        span = rules.due(c, rules.effective(config))
        if not span:
            return []
        recorded = self._recorded_compaction(c.agent, c.discussion, trigger.seq)
        if recorded:
            for rec in recorded:
                if isinstance(rec.event, ContextCompacted):  # read by that type
                    c.apply(rec.event, rec.ts_us)
            return []
        lines = self._lines(c.agent, c.discussion, span[0].seq, span[-1].seq)
        notes = hybrid.RecordedNotes()
        if config.memory.infinite_context.strategy == "hybrid":
            notes = self._observer_notes(c.agent, [t.seq for t in span], trigger.seq)
        mood = self.moods.get(c.agent) or Pad.of(config.mood)
        outcome = Compactor(self.tasks, self.clock).compact(
            c, span, lines, config, recorded=notes, mood=mood, ts_us=trigger.ts_us
        )
        events = [
            NewEvent(event=t, ts_us=trigger.ts_us, event_id=f"trace:{t.trace_id}", causation=trigger.seq)
            for t in outcome.traces
        ]
        for ev in outcome.events:
            c.apply(ev, trigger.ts_us)  # decide what follows knowing this node; it comes back as a no-op
            events.append(
                NewEvent(event=ev, ts_us=trigger.ts_us, event_id=compaction_event_id(c.discussion, ev.node_id),
                         causation=trigger.seq)
            )
        return [Write(stream=c.discussion, agent=c.agent, events=tuple(events))]

    # ------------------------------------------------------------------ reading the log

    def _recorded_compaction(self, agent: str, discussion: str, cause: int) -> list[Recorded]:
        """The compaction the log already holds for this trigger (decided before a restart)."""
        if self.ctx.read is None:
            return []
        found = self.ctx.read(cause, limit=None, stream=discussion, agent=agent, types=["ContextCompacted"])
        return [r for r in found if r.causation == cause]

    def _lines(self, agent: str, discussion: str, first_seq: int, last_seq: int):
        if self.ctx.read is None:
            raise RuntimeError("the ContextCompactor needs a host that can read the log (PolicyContext.read)")
        recs = self.ctx.read(first_seq - 1, limit=None, to_seq=last_seq, stream=discussion, agent=agent,
                             types=["MessageAppended"])
        return [llm_bridge.chat_line(r, own=False) for r in recs]

    def _observer_notes(self, agent: str, span_seqs: list[int], before: int) -> hybrid.RecordedNotes:
        """The Observer's notes about the span, from the `ObservationsRecorded` events before the trigger."""
        if self.ctx.read is None:  # `_lines` has refused such a host already
            return hybrid.RecordedNotes()
        recs = self.ctx.read(0, limit=None, to_seq=before, agent=agent, types=["ObservationsRecorded"])
        return hybrid.recorded_for_span([r.event for r in recs if isinstance(r.event, ObservationsRecorded)],
                                        span_seqs)

    # ------------------------------------------------------------------ snapshots

    def state(self) -> Any:
        return {"settings": self.settings.state(), "discussions": self.discussions, "moods": self.moods}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            # Keyed by (agent, discussion id); a snapshot from before discussion ids per agent keyed by the id alone.
            self.discussions = {(c.agent, c.discussion): c for c in state["discussions"].values()}
            self.moods = state["moods"]

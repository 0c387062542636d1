"""The WorkingMemory actor: each agent's Baddeley slots, kept by turn (a logical actor per agent).

- a user message starts a turn: every slot decays, and slots below the floor are evicted;
- a newly encoded trace takes focus, and so do the best results of a retrieval;
- a pruned, superseded or forgotten trace leaves; so does a trace made from a message that was edited or removed
  (`MessageEdited` / `MessageRemoved`: its words are no longer what the conversation says), and a trace made from
  the old words that is encoded after the change never takes focus (as the trace book supersedes it at encoding);
- a personality change resizes the slots (7, +1 openness, −1 conscientiousness, within 5–9).
Each change is one `WorkingMemoryUpdated` (stream `agent:<agent>`) carrying the whole state after it.
"""

from __future__ import annotations

import bisect

from engram.config import defaults as d
from engram.events import cognitive as ev
from engram.events.control import AgentForgotten, DiscussionForgotten
from engram.events.memory_edits import MemoryDeleted, MemoryEdited
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import MessageAppended, MessageEdited, MessageRemoved
from engram.kernel.ids import agent_stream
from engram.memory.cognitive.personality import working_memory_capacity
from engram.memory.cognitive.working_memory import WorkingMemory
from engram.policies.cognitive_base import CognitivePolicy


class _AgentWm:
    def __init__(self, capacity: int):
        self.wm = WorkingMemory(capacity)
        self.traces: dict[str, tuple[str, str]] = {}  # trace id -> (content, stream)
        self.turn_seqs: list[int] = []  # seq of each user message, in order: turn n began at turn_seqs[n - 1]
        self.sources: dict[str, tuple[str, ...]] = {}  # trace id -> the message ids it was made from
        self.changed: dict[tuple[str, str], int] = {}  # (discussion, message id) -> seq of its latest edit or removal

    def __setstate__(self, state: dict) -> None:
        # A snapshot from before slots followed message edits: the traces it knew keep no message ids (an edit of
        # their message leaves their slot to decay, as it did), every trace encoded since is followed.
        self.__dict__.update(state)
        self.__dict__.setdefault("sources", {})
        self.__dict__.setdefault("changed", {})

    def made_from_old_words(self, rec: Recorded, message_ids: tuple[str, ...]) -> bool:
        """A trace decided before one of its messages changed (its cause is older than the change) says what the
        message no longer says."""
        return rec.causation is not None and any(rec.causation < self.changed.get((rec.stream, m), -1) for m in message_ids)

    def forget(self, ids: list[str]) -> None:
        for tid in ids:
            self.traces.pop(tid, None)
            self.sources.pop(tid, None)

    def turn_at(self, seq: int | None) -> int | None:
        """The turn an event at `seq` belongs to (what it was caused by)."""
        return None if seq is None else bisect.bisect_right(self.turn_seqs, seq)


class WorkingMemoryPolicy(CognitivePolicy):
    name = "working-memory"
    interests = frozenset(
        {
            "MessageAppended",
            "TraceEncoded",
            "TraceRetrieved",
            "TracePruned",
            "ConflictResolved",
            "SettingsChanged",
            "DiscussionForgotten",
            "AgentForgotten",
            "MemoryEdited",
            "MemoryDeleted",
            "MessageEdited",
            "MessageRemoved",
        }
    )

    # A retrieval's focus is recorded with the next events (within the actor's linger, in log order: the same slots);
    # a read of working memory after a position folds the log up to it first (read-your-writes).
    unhurried = frozenset({"TraceRetrieved"})

    def __init__(self, ctx):
        super().__init__(ctx)
        self.agents: dict[str, _AgentWm] = {}

    def _agent(self, agent: str) -> _AgentWm:
        a = self.agents.get(agent)
        if a is None:
            a = self.agents[agent] = _AgentWm(self._capacity(agent))
        return a

    def _capacity(self, agent: str) -> int:
        cfg = self.config_of(agent)
        return working_memory_capacity(cfg.personality, cfg.memory.working_memory.capacity)

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes = []
        for rec in batch:
            if rec.type == "SettingsChanged":
                self.settings.apply(rec)
                if rec.stream.startswith("agent:") and self.owns(rec.agent) and rec.agent in self.agents:
                    a = self.agents[rec.agent]
                    evicted = a.wm.set_capacity(self._capacity(rec.agent))
                    if evicted:
                        writes.append(self._update(rec, a, "capacity", (), evicted))
                continue
            if not self.owns(rec.agent):
                continue
            write = self._apply(rec)
            if write is not None:
                writes.append(write)
        return writes

    def _apply(self, rec: Recorded) -> Write | None:
        e = rec.event
        a = self._agent(rec.agent)
        if isinstance(e, MessageAppended):
            if e.role != "user":
                return None
            had = len(a.wm)
            a.turn_seqs.append(rec.seq)
            evicted = a.wm.tick()
            return self._update(rec, a, "turn", (), evicted) if had else None
        if isinstance(e, ev.TraceEncoded):
            a.traces[e.trace_id] = (e.content, rec.stream)
            if e.source_message_ids:
                a.sources[e.trace_id] = tuple(e.source_message_ids)
                if a.made_from_old_words(rec, e.source_message_ids):
                    a.forget([e.trace_id])  # superseded as it is encoded: no retrieval brings it back into focus
                    return None
            evicted = a.wm.focus(e.trace_id, e.content, a.turn_at(rec.causation))
            return self._update(rec, a, "encoded", (e.trace_id,), evicted)
        if isinstance(e, ev.TraceRetrieved):
            focused, evicted = [], []
            for tid in e.trace_ids[: d.WORKING_MEMORY_FOCUS_PER_RETRIEVAL]:
                known = a.traces.get(tid)
                if known is not None:
                    evicted += a.wm.focus(tid, known[0])
                    focused.append(tid)
            return self._update(rec, a, "retrieved", tuple(focused), evicted) if focused else None
        if isinstance(e, ev.TracePruned):
            return self._drop(rec, a, [e.trace_id], "pruned")
        if isinstance(e, ev.ConflictResolved) and e.resolution != "keep_both":
            return self._drop(rec, a, [e.loser], "superseded")
        if isinstance(e, DiscussionForgotten):
            gone = [tid for tid, (_, stream) in a.traces.items() if stream == e.discussion_id]
            a.forget(gone)
            a.changed = {k: v for k, v in a.changed.items() if k[0] != e.discussion_id}
            return self._drop(rec, a, gone, "forgotten")
        if isinstance(e, AgentForgotten) and e.agent_id == rec.agent:
            gone = list(a.traces)
            a.forget(gone)
            a.changed.clear()
            return self._drop(rec, a, gone, "forgotten")
        if isinstance(e, MemoryDeleted) and e.kind == "trace":
            a.forget([e.memory_id])
            return self._drop(rec, a, [e.memory_id], "forgotten")
        if isinstance(e, (MessageEdited, MessageRemoved)):
            # Message ids are the discussion's; a trace of another discussion with the same id is not its.
            a.changed[(rec.stream, e.message_id)] = rec.seq
            gone = sorted(tid for tid, ids in a.sources.items() if e.message_id in ids and a.traces[tid][1] == rec.stream)
            a.forget(gone)  # superseded: no retrieval brings them back into focus
            return self._drop(rec, a, gone, "superseded")
        if isinstance(e, MemoryEdited) and e.kind == "trace" and e.content is not None and e.memory_id in a.traces:
            a.traces[e.memory_id] = (e.content, a.traces[e.memory_id][1])
            return self._update(rec, a, "edited", (), []) if a.wm.rewrite(e.memory_id, e.content) else None
        return None

    def _drop(self, rec: Recorded, a: _AgentWm, ids: list[str], reason: str) -> Write | None:
        evicted = [x for x in (a.wm.drop(tid, reason) for tid in ids) if x is not None]
        return self._update(rec, a, reason, (), evicted) if evicted else None

    def _update(self, rec: Recorded, a: _AgentWm, reason: str, focused: tuple[str, ...], evicted: list) -> Write:
        event = ev.WorkingMemoryUpdated(
            turn=a.wm.turn,
            capacity=a.wm.capacity,
            reason=reason,
            slots=a.wm.slots(),
            focused=focused,
            evicted=tuple(evicted),
        )
        return Write(
            stream=agent_stream(rec.agent),
            agent=rec.agent,
            events=(NewEvent(event=event, ts_us=rec.ts_us, event_id=f"wm:{rec.stream}:{rec.seq}", causation=rec.seq),),
        )

    def state(self):
        return {"base": super().state(), "agents": self.agents}

    def restore(self, state) -> None:
        if state:
            super().restore(state["base"])
            self.agents = state["agents"]

"""The Reflector: condenses an observation log once its active notes exceed 40,000 tokens.

It folds the observation logs (`engram.memory.background.observation_log`) and the agent's traces
(`engram.memory.background.traces`); when an activation (or notes recorded without buffering) takes a log's
active notes past `memory.reflector.activationTokens`, it asks the `reflect` memory task to merge them,
shows it the existing traces they may contradict, and records the outcome
(`engram.memory.background.reflector.reflection_events`): `Reflected`, the new traces and their edges, and the
contradictions resolved by personality. In an agent-wide log, each discussion's notes are reflected
separately so that every trace derives from one discussion (forgetting it forgets them).

Events take the event time of the event that crossed the threshold, with it as causation.

For an agent whose messages auto-ingest turns into traces, a reflection waits until auto-ingest has
handled (`FactsIngested`) every message its notes come from, so that a note restating what auto-ingest
kept verifies that trace instead of becoming a second copy, whichever of the two actors is ahead (an
imported history is observed and reflected long before auto-ingest reaches its end). The reflection
then takes the event time and causation of the `FactsIngested` that let it run.
"""

from __future__ import annotations

from typing import Any

from engram.config.recorded import SCOPE_AGENT
from engram.events.background import ObservationsActivated, ObservationsRecorded
from engram.events.cognitive import FactsIngested
from engram.events.control import AgentForgotten, SettingsChanged
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import MessageAppended
from engram.memory.background import observation_log as obs
from engram.memory.background.reflector import due, existing_briefs, reflection_events
from engram.memory.background.traces import TraceFold
from engram.memory.cognitive.book import INTERESTS as TRACE_EVENTS
from engram.memory.cognitive.personality import Pad
from engram.policies.auto_ingest import ingests
from engram.policies.background_base import BackgroundPolicy
from engram.policies.base import PolicyContext


class Reflector(BackgroundPolicy):
    name = "reflector"
    interests = obs.INTERESTS | TRACE_EVENTS | {"SettingsChanged", "MessageAppended"}
    unhurried = frozenset({"TraceRetrieved"})  # folded with the next events (in log order): see Policy.unhurried

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.log = obs.ObservationLog()
        self.folds: dict[str, TraceFold] = {}
        self._own: set[str] = set()  # ids of events folded when decided: their echo from the log is skipped
        # Per agent, the seqs of messages auto-ingest will handle and has not yet (it handles them in order).
        self.uningested: dict[str, list[int]] = {}

    def fold(self, agent: str) -> TraceFold:
        f = self.folds.get(agent)
        if f is None:
            f = self.folds[agent] = TraceFold(agent)
        return f

    def mood_of(self, agent: str) -> Pad:
        book = self.fold(agent).book
        return book.mood if book.mood is not None else Pad.of(self.config_of(agent).mood)

    # ------------------------------------------------------------------ handling

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes: list[Write] = []
        for rec in batch:
            if rec.event_id is not None and rec.event_id in self._own:
                self._own.discard(rec.event_id)  # decided here, folded then
                continue
            if isinstance(rec.event, SettingsChanged):
                self.settings.apply(rec)
                if rec.stream.startswith("agent:") and rec.event.scope == SCOPE_AGENT and self.owns(rec.agent):
                    # A lower threshold may make a log due now.
                    for key in sorted(k for k in self.log.logs if k[0] == rec.agent):
                        writes += self._maybe_reflect(key, rec)
                continue
            if not self.owns(rec.agent):
                continue
            if isinstance(rec.event, MessageAppended) and ingests(self.config_of(rec.agent), rec.event.role):
                self.uningested.setdefault(rec.agent, []).append(rec.seq)
            if rec.type in TRACE_EVENTS:
                self.fold(rec.agent).apply(rec)
            if isinstance(rec.event, FactsIngested):
                waiting = self.uningested.get(rec.agent)
                if waiting and waiting[0] <= rec.event.source_seq:
                    self.uningested[rec.agent] = [s for s in waiting if s > rec.event.source_seq]
                    for key in sorted(k for k in self.log.logs if k[0] == rec.agent):
                        writes += self._maybe_reflect(key, rec)
            if rec.type in obs.INTERESTS:
                changed = self.log.apply(rec)
                if isinstance(rec.event, AgentForgotten):
                    self.folds.pop(rec.event.agent_id, None)
                    self.uningested.pop(rec.event.agent_id, None)
                    self.forget_agent(rec.event.agent_id)
                elif isinstance(rec.event, ObservationsActivated) or (
                    isinstance(rec.event, ObservationsRecorded) and not rec.event.buffered
                ):
                    for key in sorted(changed):
                        writes += self._maybe_reflect(key, rec)
        return writes

    def _maybe_reflect(self, key: obs.LogKey, cause: Recorded) -> list[Write]:
        agent, scope, scope_id = key
        cfg = self.config_of(agent)
        st = self.log.logs.get(key)
        threshold = cfg.memory.reflector.activation_tokens
        if st is None or not cfg.memory.reflector.enabled or not due(st.active_tokens(), threshold):
            return []
        waiting = self.uningested.get(agent) if ingests(cfg, "user") or ingests(cfg, "assistant") else None
        if waiting and waiting[0] <= max((s for e in st.active() for s in e.note.source_seqs), default=0):
            return []  # auto-ingest has not handled every message of these notes yet: its FactsIngested resumes this
        by_stream: dict[str, list] = {}
        for entry in st.active():
            by_stream.setdefault(entry.stream, []).append(entry.note)
        writes = []
        for stream, notes in sorted(by_stream.items(), key=lambda kv: min(n.source_seqs[0] if n.source_seqs else 0 for n in kv[1])):
            fold = self.fold(agent)
            result = self.tasks.reflect(notes, existing=existing_briefs(fold, notes), personality=cfg.personality)
            decided = reflection_events(
                agent=agent, scope=scope, scope_id=scope_id, stream=stream, notes=notes, reflection=result.value,
                llm=result.llm, fold=fold, config=cfg, mood=self.mood_of(agent), ts_us=cause.ts_us,
                threshold=threshold, reflection_id=f"{scope}:{scope_id}:{stream}:{cause.seq}",
            )
            events = []
            for event_id, event in decided:
                own_id = f"reflect:{event_id}"
                events.append(NewEvent(event=event, ts_us=cause.ts_us, event_id=own_id, causation=cause.seq))
                self._own.add(own_id)
            # The notes are consumed now (the Reflected event comes back later, and is skipped then).
            self.log.apply(Recorded(seq=cause.seq, stream=stream, stream_version=0, agent=agent, ts_us=cause.ts_us,
                                    event=decided[0][1]))
            self.log.drop_consumed(key)  # the log keeps them; this reader needs only what is left to reflect
            writes.append(Write(stream, agent, tuple(events)))
        return writes

    # ------------------------------------------------------------------ snapshots

    def state(self) -> Any:
        return {"settings": self.settings.state(), "log": self.log, "folds": self.folds, "own": self._own,
                "uningested": self.uningested}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            self.log, self.folds, self._own = state["log"], state["folds"], state["own"]
            self.uningested = state.get("uningested", {})

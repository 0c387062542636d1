"""The Consolidator: at every `ClockTick`, everything due for that agent through the tick, each at its own boundary.

It folds each owned agent's traces and graph (no embeddings kept: it embeds only the episodic
traces it clusters, once each) and keeps the agenda of `engram.memory.background.consolidation`: at a tick
it runs what fell due since the previous tick, boundary by boundary (idle boundaries cost nothing and
are not recorded one by one). Each decision goes to the stream of the trace it concerns (forgetting a
discussion forgets them), at the event time of its boundary, with deterministic ids (a boundary's edges
and reviews of one discussion as one `EdgesAdded` and one `TracesReinforced`); then one
`ConsolidationRan` per tick reports in `agent:<agent>` (counts per step, the boundaries that had work,
what was bounded, duration).

What a run at boundary B sees is the agent's memory as of B, whenever its events arrived: an event dated after
the time consolidation has run through (`clock_us`) is held, not folded, until the tick that reaches its time;
at that tick the held events up to it are folded in event-time order (then discussion, then log order), before
the run. So a whole conversation appended at once — auto-ingest racing hours ahead of the consolidation actor,
verifying and superseding traces, changing the mood — is consolidated at each boundary exactly as if the
consolidation actor had kept up, and the output does not depend on how the log interleaved the two actors.

Events dated at or before that time (an older conversation imported after a newer one) are late: they are held
per discussion until auto-ingest has handled every message of the discussion appended so far (a `FactsIngested`
for each, and the traces those name have arrived; checked at the end of each batch) — or until the next tick —
then folded in event-time order and consolidated at once along their own timelines, through the time already
run, boundary by boundary with the five steps in order, with the last of them as causation ("it joins the
agent's present"); that work is counted in the next tick's report. So a late discussion's boundaries see its
whole pool, as they would have live: no schema clustered from the first of a session's traces, no contradiction
resolved before the schema step of its boundary has seen both sides.
Replay folds these events and never runs anything, so it needs no clock.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from engram.events.background import ConsolidationRan
from engram.events.cognitive import TraceEncoded
from engram.events.compact import compact
from engram.events.control import AgentForgotten, ClockTick, DiscussionForgotten, SettingsChanged
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import MessageAppended
from engram.kernel.ids import agent_stream
from engram.memory.background import consolidation
from engram.memory.background.agenda import ConsolidationState
from engram.memory.background.traces import TraceFold
from engram.memory.cognitive import corrections
from engram.memory.cognitive.book import INTERESTS as TRACE_EVENTS
from engram.memory.cognitive.personality import Pad
from engram.policies.auto_ingest import ingests
from engram.policies.background_base import BackgroundPolicy
from engram.policies.base import PolicyContext
from engram.providers.services import embedder_of

# The shape of `ConsolidationState` in snapshots: 2 = the agenda (each trace on its own timeline).
AGENDA_VERSION = 2


class Consolidator(BackgroundPolicy):
    name = "consolidator"
    # MessageAppended: which messages auto-ingest has yet to handle (a late discussion's schema checks wait for them).
    interests = TRACE_EVENTS | {"ClockTick", "SchemaCreated", "SettingsChanged", "MessageAppended"}
    unhurried = frozenset({"TraceRetrieved"})  # folded with the next events (in log order): see Policy.unhurried
    # 2: schema checks wait for their discussion (schema_waiting, stream_latest); 3: events from after the clock are
    # held until their tick (held), late ones until their discussion is complete (late; ingesting, awaiting).
    STATE_VERSION = 3

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.folds: dict[str, TraceFold] = {}
        self.states: dict[str, ConsolidationState] = {}
        self._own: set[str] = set()  # ids of events folded when decided: their echo from the log is skipped
        self._vectors: dict[str, dict[str, np.ndarray]] = {}  # agent -> trace -> embedding (not snapshotted)
        # Work done for late arrivals since the agent's last tick, reported with the next tick.
        self.unreported: dict[str, consolidation.RunResult | None] = {}
        # Per agent, events dated after its consolidation clock, folded at the tick that reaches them.
        self.held: dict[str, list[Recorded]] = {}
        # Per agent, late events (dated at or before its clock) by discussion, folded once the discussion is complete.
        self.late: dict[str, dict[str, list[Recorded]]] = {}

    def fold(self, agent: str) -> TraceFold:
        f = self.folds.get(agent)
        if f is None:
            f = self.folds[agent] = TraceFold(agent)
            self.states[agent] = ConsolidationState()
        return f

    # ------------------------------------------------------------------ handling

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes: list[Write] = []
        for rec in batch:
            if rec.event_id is not None and rec.event_id in self._own:
                self._own.discard(rec.event_id)
                continue
            if isinstance(rec.event, SettingsChanged):
                self.settings.apply(rec)
                continue
            if not self.owns(rec.agent):
                continue
            if isinstance(rec.event, ClockTick):
                writes += self.run(rec, rec.event)
                continue
            if isinstance(rec.event, AgentForgotten):
                self.folds.pop(rec.event.agent_id, None)
                self.states.pop(rec.event.agent_id, None)
                self._vectors.pop(rec.event.agent_id, None)
                self.held.pop(rec.event.agent_id, None)
                self.late.pop(rec.event.agent_id, None)
                self.forget_agent(rec.event.agent_id)
                continue
            fold = self.fold(rec.agent)
            state = self.states[rec.agent]
            if isinstance(rec.event, MessageAppended):
                if ingests(self.config_of(rec.agent), rec.event.role):
                    state.message_arrived(rec.stream, rec.seq)
                continue
            state.ingest_arrived(rec)
            if isinstance(rec.event, DiscussionForgotten):
                gone = self._forget_waiting(rec.agent, rec.event.discussion_id)
                fold.apply(rec)
                state.observe(rec.event, rec.ts_us)
                state.forget_missing(fold.book.traces)
                state.forget_stream(rec.event.discussion_id)
                state.arrived -= gone
                self._forget_vectors(rec.agent)
            elif not self.config_of(rec.agent).memory.consolidation.enabled:
                fold.apply(rec)  # no tick will come to release it
                state.observe(rec.event, rec.ts_us)
            elif rec.ts_us > state.clock_us:
                self.held.setdefault(rec.agent, []).append(rec)
            else:
                self.late.setdefault(rec.agent, {}).setdefault(rec.stream, []).append(rec)
        for agent in sorted(self.late):
            known = self.states.get(agent)
            complete = [s for s in sorted(self.late[agent]) if known is not None and known.settled(s)]
            if complete:
                writes += self.catch_up(agent, complete)
        return writes

    def _forget_waiting(self, agent: str, discussion: str) -> set[str]:
        """Drop the waiting (held and late) events a forgotten discussion takes with it, as the log's erasure does:
        its own, and any other that names one of its traces (a recall that retrieved them, an edge to them).
        Returns its trace ids."""
        fold = self.fold(agent)
        waiting = self.held.get(agent, []) + [r for rs in self.late.get(agent, {}).values() for r in rs]
        gone = {tid for tid, t in fold.book.traces.items() if t.stream == discussion}
        gone |= {r.event.trace_id for r in waiting if r.stream == discussion and isinstance(r.event, TraceEncoded)}

        def kept(r: Recorded) -> bool:
            return r.stream != discussion and not (_named(r.event) & gone)

        self.held[agent] = [r for r in self.held.get(agent, []) if kept(r)]
        late = self.late.get(agent, {})
        late.pop(discussion, None)
        for stream in list(late):
            late[stream] = [r for r in late[stream] if kept(r)]
        return gone

    def _release(self, agent: str, through_us: int) -> None:
        """Fold the held events dated up to `through_us`, in event-time order (then discussion, then log order)."""
        held = self.held.get(agent)
        if not held:
            return
        due = [r for r in held if r.ts_us <= through_us]
        self.held[agent] = [r for r in held if r.ts_us > through_us]
        self._fold_in_time_order(agent, due)

    def _release_late(self, agent: str, streams: list[str]) -> int:
        """Fold the late events of `streams`; the seq of the last of them (0 if none)."""
        late = self.late.get(agent, {})
        due = [r for s in streams for r in late.pop(s, ())]
        if not late:
            self.late.pop(agent, None)
        self._fold_in_time_order(agent, due)
        return max((r.seq for r in due), default=0)

    def _fold_in_time_order(self, agent: str, recs: list[Recorded]) -> None:
        fold, state = self.fold(agent), self.states[agent]
        for rec in sorted(recs, key=lambda r: (r.ts_us, r.stream, r.seq)):
            fold.apply(rec)
            state.observe(rec.event, rec.ts_us)

    def run(self, tick: Recorded, clock: ClockTick) -> list[Write]:
        agent = tick.agent
        cfg = self.config_of(agent)
        if not cfg.memory.consolidation.enabled:
            return []
        started = time.perf_counter()
        self.fold(agent)
        if self.late.get(agent):  # whatever has arrived of late discussions is all this tick's time knows of them
            self._release_late(agent, sorted(self.late[agent]))
        self._release(agent, tick.ts_us)
        since = self.states[agent].clock_us
        result = self._consolidate(agent, tick.ts_us, tick.seq)
        duration_ms = (time.perf_counter() - started) * 1000.0
        writes = self._writes(agent, result, tick.seq)  # this tick's own decisions
        pending, self.unreported[agent] = self.unreported.get(agent), None
        if pending is not None:  # late arrivals' work since the last tick (already written): counted in the report
            pending.add(result)
            pending.traces, result = result.traces, pending
        report = ConsolidationRan(
            interval_s=clock.interval_s, traces=result.traces, pruned=result.pruned, edges=result.edges,
            schemas=result.schemas, conflicts=result.conflicts, reinforced=result.reinforced,
            max_traces=cfg.memory.consolidation.max_traces_per_run, bounded=tuple(result.bounded),
            duration_ms=round(duration_ms, 3), llm_calls=result.llm_calls, since_us=clock.since_us or since,
            runs=result.runs, late=result.late, first_us=result.first_us,
        )
        writes.append(Write(agent_stream(agent), agent, (NewEvent(
            event=report, ts_us=tick.ts_us, causation=tick.seq, event_id=f"consolidation:{agent}:{tick.ts_us}"),)))
        self._forget_vectors(agent)
        return writes

    def catch_up(self, agent: str, streams: list[str]) -> list[Write]:
        """Late discussions that are complete: their events folded, and consolidated along their own timelines
        through the time already run (see the module doc)."""
        cause = self._release_late(agent, streams)
        result = self._consolidate(agent, self.states[agent].clock_us, cause, count=False, late=True)
        if not result.decisions:
            return []
        pending = self.unreported.get(agent)
        if pending is None:
            self.unreported[agent] = result
        else:
            pending.add(result)
        writes = self._writes(agent, result, cause)
        result.decisions = []  # reported by count only
        self._forget_vectors(agent)
        return writes

    def _consolidate(self, agent: str, through_us: int, cause: int, count: bool = True,
                     late: bool = False) -> consolidation.RunResult:
        cfg = self.config_of(agent)
        fold = self.fold(agent)
        book = fold.book
        mood = book.mood if book.mood is not None else Pad.of(cfg.mood)
        state = self.states[agent]
        if consolidation.may_cluster(fold, state, through_us):
            embedder_of(self.ctx.services)  # the model loads once, outside the run's measured duration
        return consolidation.run(
            agent, fold, state, now_us=through_us, config=cfg, mood=mood,
            vectors=lambda ids, texts: self._embed(agent, ids, texts),
            summarize=lambda members: self.tasks.summarize_schema(members),
            contradicts=corrections.contradiction, count=count, late=late,
        )

    def _writes(self, agent: str, result: consolidation.RunResult, cause: int) -> list[Write]:
        """The decisions as appends, a boundary's edges and reviews of a discussion merged into one event each
        (`engram.events.compact`): they were folded here one by one as they were decided, and fold the same."""
        writes: list[Write] = []
        items = [((d_.stream, d_.ts_us), f"consolidate:{d_.event_id}", d_.event) for d_ in result.decisions]
        for (stream, ts_us), own_id, event in compact(items):
            self._own.add(own_id)
            new = NewEvent(event=event, ts_us=ts_us, event_id=own_id, causation=cause)
            if writes and writes[-1].stream == stream:
                writes[-1] = Write(stream, agent, writes[-1].events + (new,))
            else:
                writes.append(Write(stream, agent, (new,)))
        return writes

    def _embed(self, agent: str, ids: list[str], texts: list[str]) -> np.ndarray:
        cache = self._vectors.setdefault(agent, {})
        missing = [(i, t) for i, t in zip(ids, texts) if i not in cache]
        if missing:
            vecs = np.asarray(embedder_of(self.ctx.services).embed([t for _, t in missing]), dtype=np.float32)
            for (i, _), v in zip(missing, vecs):
                cache[i] = v
        return np.stack([cache[i] for i in ids])

    def _forget_vectors(self, agent: str) -> None:
        """Vectors of traces that are no longer candidates (in a schema, inactive, forgotten) are let go."""
        cache, traces = self._vectors.get(agent, {}), self.folds[agent].book.traces
        schematized = self.states[agent].schematized
        for tid in [t for t in cache if t in schematized or t not in traces or not traces[t].active]:
            del cache[tid]

    # ------------------------------------------------------------------ snapshots

    def state(self) -> Any:
        return {"settings": self.settings.state(), "folds": self.folds, "states": self.states, "own": self._own,
                "unreported": self.unreported, "agenda": AGENDA_VERSION, "held": self.held, "late": self.late}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            self.folds, self._own = state["folds"], state["own"]
            self.unreported = state.get("unreported", {})
            self.held = state.get("held", {})
            self.late = state.get("late", {})
            if state.get("agenda") == AGENDA_VERSION:
                self.states = state["states"]
            else:  # a snapshot from before the agenda: schedule every trace afresh from its own state
                self.states = {agent: ConsolidationState() for agent in self.folds}
                for agent, old in state["states"].items():
                    new = self.states.setdefault(agent, ConsolidationState())
                    new.resolved, new.schematized = dict(old.resolved), set(old.schematized)
                    new.contradictions, new.clock_us = set(old.contradictions), old.clock_us


def _named(event) -> set[str]:
    """The trace ids an event names (to drop what a forgotten discussion takes with it)."""
    out: set[str] = set()
    for name in ("trace_id", "src", "dst", "winner", "loser", "schema_trace_id", "duplicate_of"):
        value = getattr(event, name, None)
        if isinstance(value, str):
            out.add(value)
    for name in ("trace_ids", "member_ids"):
        out.update(getattr(event, name, None) or ())
    for name in ("links", "edges"):
        for edge in getattr(event, name, None) or ():
            out.update((getattr(edge, "src", ""), getattr(edge, "dst", "")))
    for item in getattr(event, "items", None) or ():
        out.add(getattr(item, "trace_id", ""))
    for skipped in getattr(event, "skipped", None) or ():
        if getattr(skipped, "duplicate_of", None):
            out.add(skipped.duplicate_of)
    out.discard("")
    return out

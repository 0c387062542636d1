"""The Consolidator: at every `ClockTick`, everything due for that agent through the tick, each at its own boundary.

It folds each owned agent's traces and graph (no embeddings kept: it embeds only the episodic
traces it clusters, once each) and keeps the agenda of `engram.background.consolidation`: at a tick
it runs what fell due since the previous tick, boundary by boundary (idle boundaries cost nothing and
are not recorded one by one). Each decision goes to the stream of the trace it concerns (forgetting a
discussion forgets them), at the event time of its boundary, with deterministic ids (a boundary's edges
and reviews of one discussion as one `EdgesAdded` and one `TracesReinforced`); then one
`ConsolidationRan` per tick reports in `agent:<agent>` (counts per step, the boundaries that had work,
what was bounded, duration).

A trace that arrives after its own first boundary was passed (an older conversation imported after a
newer one) is consolidated at once along its own timeline, through the time already run, with the trace
event as causation ("it joins the agent's present"); that work is counted in the next tick's report.
Replay folds these events and never runs anything, so it needs no clock.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from engram.background import consolidation
from engram.background.traces import TraceFold
from engram.cognitive import corrections
from engram.cognitive.book import INTERESTS as TRACE_EVENTS
from engram.cognitive.personality import Pad
from engram.events.background import ConsolidationRan
from engram.events.compact import compact
from engram.events.cognitive import TraceEncoded
from engram.events.control import AgentForgotten, ClockTick, DiscussionForgotten
from engram.events.envelope import NewEvent, Recorded, Write
from engram.policies.background_base import BackgroundPolicy
from engram.policies.base import PolicyContext
from engram.policies.cognitive_base import embedder_of
from engram.settings import agent_stream

# The shape of `ConsolidationState` in snapshots: 2 = the agenda (each trace on its own timeline).
AGENDA_VERSION = 2


class Consolidator(BackgroundPolicy):
    name = "consolidator"
    interests = TRACE_EVENTS | {"ClockTick", "SchemaCreated", "SettingsChanged"}
    STATE_VERSION = 2  # 2: the agenda keeps schema checks waiting for their discussion (schema_waiting, stream_latest)

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.folds: dict[str, TraceFold] = {}
        self.states: dict[str, consolidation.ConsolidationState] = {}
        self._own: set[str] = set()  # ids of events folded when decided: their echo from the log is skipped
        self._vectors: dict[str, dict[str, np.ndarray]] = {}  # agent -> trace -> embedding (not snapshotted)
        # Work done for late arrivals since the agent's last tick, reported with the next tick.
        self.unreported: dict[str, consolidation.RunResult | None] = {}

    def fold(self, agent: str) -> TraceFold:
        f = self.folds.get(agent)
        if f is None:
            f = self.folds[agent] = TraceFold(agent)
            self.states[agent] = consolidation.ConsolidationState()
        return f

    # ------------------------------------------------------------------ handling

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes: list[Write] = []
        for rec in batch:
            if rec.event_id is not None and rec.event_id in self._own:
                self._own.discard(rec.event_id)
                continue
            if rec.type == "SettingsChanged":
                self.settings.apply(rec)
                continue
            if not self.owns(rec.agent):
                continue
            if isinstance(rec.event, ClockTick):
                writes += self.run(rec)
                continue
            if isinstance(rec.event, AgentForgotten):
                self.folds.pop(rec.event.agent_id, None)
                self.states.pop(rec.event.agent_id, None)
                self._vectors.pop(rec.event.agent_id, None)
                self.forget_agent(rec.event.agent_id)
                continue
            fold = self.fold(rec.agent)
            fold.apply(rec)
            state = self.states[rec.agent]
            state.observe(rec.event, rec.ts_us)
            if isinstance(rec.event, DiscussionForgotten):
                state.forget_missing(fold.book.traces)
                self._forget_vectors(rec.agent)
            elif isinstance(rec.event, TraceEncoded) and state.clock_us and rec.ts_us < state.clock_us:
                writes += self.catch_up(rec)
        return writes

    def run(self, tick: Recorded) -> list[Write]:
        agent = tick.agent
        cfg = self.config_of(agent)
        if not cfg.memory.consolidation.enabled:
            return []
        started = time.perf_counter()
        self.fold(agent)
        since = self.states[agent].clock_us
        result = self._consolidate(agent, tick.ts_us, tick.seq)
        duration_ms = (time.perf_counter() - started) * 1000.0
        writes = self._writes(agent, result, tick.seq)  # this tick's own decisions
        pending, self.unreported[agent] = self.unreported.get(agent), None
        if pending is not None:  # late arrivals' work since the last tick (already written): counted in the report
            pending.add(result)
            pending.traces, result = result.traces, pending
        report = ConsolidationRan(
            interval_s=tick.event.interval_s, traces=result.traces, pruned=result.pruned, edges=result.edges,
            schemas=result.schemas, conflicts=result.conflicts, reinforced=result.reinforced,
            max_traces=cfg.memory.consolidation.max_traces_per_run, bounded=tuple(result.bounded),
            duration_ms=round(duration_ms, 3), llm_calls=result.llm_calls, since_us=tick.event.since_us or since,
            runs=result.runs, late=result.late, first_us=result.first_us,
        )
        writes.append(Write(agent_stream(agent), agent, (NewEvent(
            event=report, ts_us=tick.ts_us, causation=tick.seq, event_id=f"consolidation:{agent}:{tick.ts_us}"),)))
        self._forget_vectors(agent)
        return writes

    def catch_up(self, rec: Recorded) -> list[Write]:
        """A late trace: its own timeline through the time consolidation has already run (see the module doc)."""
        agent = rec.agent
        if not self.config_of(agent).memory.consolidation.enabled:
            return []
        result = self._consolidate(agent, self.states[agent].clock_us, rec.seq, count=False, late=True)
        if not result.decisions:
            return []
        pending = self.unreported.get(agent)
        if pending is None:
            self.unreported[agent] = result
        else:
            pending.add(result)
        writes = self._writes(agent, result, rec.seq)
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
                "unreported": self.unreported, "agenda": AGENDA_VERSION}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            self.folds, self._own = state["folds"], state["own"]
            self.unreported = state.get("unreported", {})
            if state.get("agenda") == AGENDA_VERSION:
                self.states = state["states"]
            else:  # a snapshot from before the agenda: schedule every trace afresh from its own state
                self.states = {agent: consolidation.ConsolidationState() for agent in self.folds}
                for agent, old in state["states"].items():
                    new = self.states.setdefault(agent, consolidation.ConsolidationState())
                    new.resolved, new.schematized = dict(old.resolved), set(old.schematized)
                    new.contradictions, new.clock_us = set(old.contradictions), old.clock_us

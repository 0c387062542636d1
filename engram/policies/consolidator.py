"""The Consolidator: at every `ClockTick`, one bounded consolidation run for that agent.

It folds each owned agent's traces and graph (no embeddings kept: it embeds only the episodic
traces it clusters, once each) and, at a tick, runs the five steps of
`engram.background.consolidation` at the tick's event time. Each step's events go to the stream of
the trace they concern (forgetting a discussion forgets them), with the tick as causation and
deterministic ids; then `ConsolidationRan` reports the run in `agent:<agent>` (counts per step, what
was bounded, duration). Replay folds these events and never runs anything, so it needs no clock.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from engram.background import consolidation
from engram.background.traces import TraceFold
from engram.cognitive.book import INTERESTS as TRACE_EVENTS
from engram.cognitive.personality import Pad
from engram.events.background import ConsolidationRan
from engram.events.control import AgentForgotten, ClockTick, DiscussionForgotten
from engram.events.envelope import NewEvent, Recorded, Write
from engram.policies.background_base import BackgroundPolicy
from engram.policies.base import PolicyContext
from engram.policies.cognitive_base import embedder_of
from engram.settings import agent_stream


class Consolidator(BackgroundPolicy):
    name = "consolidator"
    interests = TRACE_EVENTS | {"ClockTick", "SchemaCreated", "SettingsChanged"}

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.folds: dict[str, TraceFold] = {}
        self.states: dict[str, consolidation.ConsolidationState] = {}
        self._own: set[str] = set()  # ids of events folded when decided: their echo from the log is skipped
        self._vectors: dict[str, dict[str, np.ndarray]] = {}  # agent -> trace -> embedding (not snapshotted)

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
            self.states[rec.agent].observe(rec.event, rec.ts_us)
            if isinstance(rec.event, DiscussionForgotten):
                self.states[rec.agent].forget_missing(fold.book.traces)
                self._forget_vectors(rec.agent)
        return writes

    def run(self, tick: Recorded) -> list[Write]:
        agent = tick.agent
        cfg = self.config_of(agent)
        if not cfg.memory.consolidation.enabled:
            return []
        fold = self.fold(agent)
        book = fold.book
        mood = book.mood if book.mood is not None else Pad.of(cfg.mood)
        if consolidation.may_cluster(fold, self.states[agent], tick.ts_us):
            embedder_of(self.ctx.services)  # the model loads once, outside the run's measured duration
        started = time.perf_counter()
        result = consolidation.run(
            agent, fold, self.states[agent], now_us=tick.ts_us, config=cfg, mood=mood, vectors=lambda ids, texts: self._embed(agent, ids, texts),
            summarize=lambda members: self.tasks.summarize_schema(members),
        )
        duration_ms = (time.perf_counter() - started) * 1000.0
        writes: list[Write] = []
        for decision in result.decisions:
            own_id = f"consolidate:{decision.event_id}"
            self._own.add(own_id)
            event = NewEvent(event=decision.event, ts_us=tick.ts_us, event_id=own_id, causation=tick.seq)
            if writes and writes[-1].stream == decision.stream:
                writes[-1] = Write(decision.stream, agent, writes[-1].events + (event,))
            else:
                writes.append(Write(decision.stream, agent, (event,)))
        report = ConsolidationRan(
            interval_s=tick.event.interval_s, traces=result.traces, pruned=result.pruned, edges=result.edges,
            schemas=result.schemas, conflicts=result.conflicts, reinforced=result.reinforced,
            max_traces=cfg.memory.consolidation.max_traces_per_run, bounded=tuple(result.bounded),
            duration_ms=round(duration_ms, 3), llm_calls=result.llm_calls,
        )
        writes.append(Write(agent_stream(agent), agent, (NewEvent(
            event=report, ts_us=tick.ts_us, causation=tick.seq, event_id=f"consolidation:{agent}:{tick.ts_us}"),)))
        self._forget_vectors(agent)
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
        return {"settings": self.settings.state(), "folds": self.folds, "states": self.states, "own": self._own}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            self.folds, self.states, self._own = state["folds"], state["states"], state["own"]

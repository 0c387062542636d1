"""Consolidation: the five maintenance steps of the Wunderland guide, each on the timeline of what it concerns.

    1. decay sweep            soft-delete traces whose Ebbinghaus strength is below the prune threshold (0.05)
    2. co-activation replay   edges between a new trace and the traces that share its entities, or were encoded
                              close to it in time (in the 24 hours before the boundary)
    3. schema integration     cluster related episodic traces of a discussion, summarise each cluster into a
                              semantic trace linked from its members (schema_instance)
    4. conflict resolution    contradictions (from the Reflector, auto-ingest, or found here between a new trace
                              and the traces sharing its entities), resolved by confidence and personality
    5. spaced repetition      reinforce the traces whose review is due

The rule (the same for live chat, an import, and a message a year after the last): consolidation runs at
interval boundaries of event time (hourly), but only at the boundaries where something is due, and each
thing on its own timeline (`engram.memory.background.schedule`):

- a trace is checked at the boundary where its decay sweep or its review falls due, never at the idle
  boundaries in between; its reviews are made at their own boundaries, so a long silence brings the
  reviews that fell due in it, in order, before any prune — never a mass prune without a review between;
- a new trace is replayed, checked for contradictions, and offered to its discussion's schema integration
  at the first boundary at or after its encoding;
- a contradiction is resolved at the first boundary at or after both sides exist.

`run(now_us)` does everything due through `now_us`, boundary by boundary in order; each decision carries
the event time of its boundary. A trace that reaches consolidation after later boundaries were run (an
older conversation imported after a newer one) is consolidated as it would have been live: its
timeline from its encoding is run at once, at its own (past) boundaries, then it joins the present.
So what an agent remembers does not depend on the order its conversations were ingested in.
Schema integration clusters a discussion's candidates as they stand at the boundary; a late arrival's
catch-up (`late`) therefore holds a discussion's schema check back until the discussion has moved past that
boundary (a trace of it from after the boundary has arrived — its messages arrive in order, so the pool is
then the pool it would have had live), or until the next tick; otherwise clusters would form on the first of
a late session's traces, one at a time, and differ from the live ones.
Each step handles at most `maxTracesPerRun` items per boundary; the rest moves to the next boundary
and the step is named in the result's `bounded`.
Constants: `engram.config.defaults` (REPLAY_*, SCHEMA_*, REVIEW_MIN_IMPORTANCE).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from engram.memory.background.agenda import (  # noqa: F401 (ConsolidationState and pair are part of this module's API)
    CONFLICT, FRESH, SCHEMA, TRACE, ConsolidationState, _key_pair, _pair_key, _schema_candidate, active_at, pair,
)
from engram.memory.background.conflicts import Side, resolve
from engram.memory.background.schedule import time_order, worth_reviewing
from engram.memory.background.traces import TraceFold
from engram.memory.cognitive import llm_bridge
from engram.memory.cognitive.decay import strength_at
from engram.memory.cognitive.encoding import encode, trace_id
from engram.memory.cognitive.memory import entity_key
from engram.memory.cognitive.model import US_PER_S, MemoryTrace, canonical_edge
from engram.memory.cognitive.personality import Pad
from engram.config import defaults as d
from engram.config.agent import AgentConfig
from engram.events.base import Event
from engram.events.cognitive import ConflictResolved, EdgeAdded, SchemaCreated, TracePruned, TraceReinforced
from engram.events.envelope import Recorded
from engram.providers.llm.types import Result

STEPS = ("decay", "replay", "schema", "conflicts", "review")
# Embeddings of traces, by trace id (the caller caches them): ids and contents in, (n, dim) unit vectors out.
Vectors = Callable[[list[str], list[str]], np.ndarray]
# The `summarize_schema` memory task: member contents in, a Result (value: the summary, llm: provenance) out.
Summarize = Callable[[list[str]], "Result[str]"]
# Finds whether two traces contradict: (older, newer) -> a reason, or None (engram.memory.cognitive.corrections).
Contradicts = Callable[[MemoryTrace, MemoryTrace], "str | None"]

def interval_us(config: AgentConfig) -> int:
    return max(1, int(round(config.memory.consolidation.interval_hours * 3_600 * US_PER_S)))


@dataclass
class Decision:
    stream: str
    event_id: str
    event: Event
    ts_us: int = 0  # the boundary it was decided at (its event time)


@dataclass
class RunResult:
    decisions: list[Decision] = field(default_factory=list)
    traces: int = 0  # active traces at `now`
    pruned: int = 0
    edges: int = 0
    schemas: int = 0
    conflicts: int = 0
    reinforced: int = 0
    bounded: list[str] = field(default_factory=list)
    llm_calls: int = 0
    runs: int = 0  # boundaries at which something was due
    late: int = 0  # of those, boundaries before the previous run's time (a late arrival's own timeline)
    first_us: int = 0  # the first boundary run, 0 if none

    def add(self, other: "RunResult") -> None:
        for name in ("pruned", "edges", "schemas", "conflicts", "reinforced", "llm_calls", "runs", "late"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.bounded += [b for b in other.bounded if b not in self.bounded]
        if other.first_us and (not self.first_us or other.first_us < self.first_us):
            self.first_us = other.first_us


class Run:
    """One boundary of one agent; `decide` records each event and folds it at once into `fold`."""

    def __init__(self, agent: str, fold: TraceFold, state: ConsolidationState, now_us: int, config: AgentConfig,
                 mood: Pad, result: RunResult):
        self.agent, self.fold, self.state, self.now, self.config, self.mood = agent, fold, state, now_us, config, mood
        self.bound = config.memory.consolidation.max_traces_per_run
        self.result = result

    def decide(self, stream: str, event_id: str, event: Event) -> None:
        self.result.decisions.append(Decision(stream, event_id, event, self.now))
        self.fold.apply(Recorded(seq=0, stream=stream, stream_version=0, agent=self.agent, ts_us=self.now, event=event))
        self.state.observe(event, self.now)

    def stream_of(self, tid: str) -> str:
        return self.fold.book.traces[tid].stream

    def _bounded(self, step: str, kind: int, keys: list[str]) -> list[str]:
        if len(keys) <= self.bound:
            return keys
        self.state.defer(kind, keys[self.bound:], self.now)
        if step not in self.result.bounded:
            self.result.bounded.append(step)
        return keys[: self.bound]

    # ------------------------------------------------------------------ 1. decay sweep

    def decay(self, due: list[str]) -> None:
        threshold = self.config.memory.decay.prune_threshold
        traces = self.fold.book.traces
        weak = sorted(
            (strength_at(traces[tid], self.now), tid) for tid in due
            if tid in traces and traces[tid].active and strength_at(traces[tid], self.now) < threshold
        )
        for s, tid in [(s, tid) for s, tid in weak][: self.bound]:
            self.decide(self.stream_of(tid), f"prune:{tid}:{self.now}",
                        TracePruned(trace_id=tid, strength=round(s, 6), reason="decay"))
            self.result.pruned += 1
        if len(weak) > self.bound:
            self._bounded("decay", TRACE, [tid for _, tid in weak])

    # ------------------------------------------------------------------ 2. co-activation replay

    def replay(self, fresh: list[str]) -> None:
        traces = self.fold.book.traces
        new = sorted((traces[t] for t in fresh if t in traces), key=time_order)
        if not new:
            return
        recent = self.state.window(self.fold, self.now - d.REPLAY_WINDOW_S * US_PER_S, self.now)
        position = {t.trace_id: k for k, t in enumerate(recent)}
        by_entity: dict[str, list[MemoryTrace]] = {}
        for t in recent:
            for name in dict.fromkeys(entity_key(e) for e in t.entities):
                by_entity.setdefault(name, []).append(t)
        graph = self.fold.book.graph
        candidates: list[tuple[MemoryTrace, MemoryTrace, str, float]] = []
        for x in new:
            if x.trace_id not in position:
                continue
            for name in dict.fromkeys(entity_key(e) for e in x.entities):
                members = [m for m in by_entity.get(name, ()) if m.trace_id != x.trace_id]
                for m in members[-d.REPLAY_MAX_PER_ENTITY:]:
                    a, b = (m, x) if time_order(m) < time_order(x) else (x, m)
                    candidates.append((a, b, "shared_entity", d.REPLAY_ENTITY_WEIGHT))
            k = position[x.trace_id]
            neighbours = ([(recent[k - 1], x)] if k > 0 else []) + ([(x, recent[k + 1])] if k + 1 < len(recent) else [])
            for before, after in neighbours:
                if after.encoded_us - before.encoded_us <= d.REPLAY_TEMPORAL_GAP_S * US_PER_S:
                    candidates.append((before, after, "temporal_sequence", d.REPLAY_TEMPORAL_WEIGHT))
        added = 0
        for a, b, kind, weight in candidates:
            if a.trace_id == b.trace_id or canonical_edge(a.trace_id, b.trace_id, kind) in graph.edges:
                continue
            if kind == "temporal_sequence" and (b.trace_id, a.trace_id, kind) in graph.edges:
                continue
            if added >= self.bound:
                if "replay" not in self.result.bounded:
                    self.result.bounded.append("replay")
                break
            self.decide(b.stream, f"edge:{a.trace_id}:{b.trace_id}:{kind}",
                        EdgeAdded(src=a.trace_id, dst=b.trace_id, kind=kind, weight=weight))
            added += 1
        self.result.edges += added

    def contradictions(self, fresh: list[str], contradicts: Contradicts | None) -> None:
        """A new trace against the active traces naming its entities: a contradiction becomes a `contradicts`
        edge (newer -> older), resolved at this boundary by step 4."""
        if contradicts is None:
            return
        traces = self.fold.book.traces
        for tid in sorted(fresh):
            x = traces.get(tid)
            if x is None or not x.active or not x.entities:
                continue
            for oid in self.fold.named_at(x.entities, self.now, exclude=tid):
                y = traces[oid]
                if pair(tid, oid) in self.state.resolved or (tid, oid) in self.state.contradictions \
                        or (oid, tid) in self.state.contradictions or not active_at(y, self.now):
                    continue
                older, newer = (y, x) if time_order(y) < time_order(x) else (x, y)
                if contradicts(older, newer) is None:
                    continue
                self.decide(older.stream, f"edge:{newer.trace_id}:{older.trace_id}:contradicts",
                            EdgeAdded(src=newer.trace_id, dst=older.trace_id, kind="contradicts",
                                      weight=d.CONTRADICTION_EDGE_WEIGHT))

    # ------------------------------------------------------------------ 3. schema integration

    def schemas(self, streams: list[str], vectors: Vectors, summarize: Summarize) -> None:
        for stream in sorted(streams):
            pool = [
                t for t in self.fold.book.traces.values()
                if t.stream == stream and active_at(t, self.now) and _schema_candidate(t, self.state)
            ]
            pool.sort(key=time_order)
            if len(pool) > self.bound:
                if "schema" not in self.result.bounded:
                    self.result.bounded.append("schema")
                pool = pool[-self.bound:]
            fingerprint = hashlib.sha1("\x1f".join(t.trace_id for t in pool).encode()).hexdigest()
            if len(pool) < d.SCHEMA_MIN_CLUSTER or self.state.unclustered.get(stream) == fingerprint:
                continue  # too few, or the same candidates that formed no cluster last time
            seen = self.state.schema_seen.get(stream, frozenset())
            fresh = [k for k, t in enumerate(pool) if t.trace_id not in seen]
            if not fresh:
                continue  # candidates only left: no new cluster can form
            vecs = vectors([t.trace_id for t in pool], [t.content for t in pool])
            self.state.schema_seen[stream] = frozenset(t.trace_id for t in pool)
            if not _may_form(vecs, fresh, d.SCHEMA_SIMILARITY, d.SCHEMA_MIN_CLUSTER):
                self.state.unclustered[stream] = fingerprint
                continue
            found = clusters(vecs, d.SCHEMA_SIMILARITY, d.SCHEMA_MIN_CLUSTER, d.SCHEMA_MAX_CLUSTER)
            if not found:
                self.state.unclustered[stream] = fingerprint
            for cluster in found:
                self._schema(stream, [pool[i] for i in cluster], summarize)

    def _schema(self, stream: str, members: list[MemoryTrace], summarize: Summarize) -> None:
        members = sorted(members, key=time_order)
        result = summarize([t.content for t in members])
        self.result.llm_calls += 1
        summary = (result.value or "").strip()
        if not summary:
            return
        ids = [t.trace_id for t in members]
        tid = trace_id(self.agent, "schema", *sorted(ids))
        pairs: dict[int, str] = {}
        for t in members:
            mids = t.source_message_ids if len(t.source_message_ids) == len(t.source_seqs) else ("",) * len(t.source_seqs)
            for seq, mid in zip(t.source_seqs, mids):
                pairs.setdefault(seq, mid)
        counts: dict[str, int] = {}
        for t in members:
            for e in dict.fromkeys(t.entities):
                counts[e] = counts.get(e, 0) + 1
        shared = tuple(e for e, n in counts.items() if n >= 2) or tuple(counts)
        trace = encode(
            trace_id=tid, content=summary, config=self.config, mood=self.mood, scope="discussion", scope_id=stream,
            source_type="schema", source_seqs=tuple(sorted(pairs)),
            source_message_ids=tuple(pairs[s] for s in sorted(pairs) if pairs[s]), trace_type="semantic",
            category="schema", importance=max(t.importance for t in members),
            confidence=sum(t.confidence for t in members) / len(members), entities=shared, tags=("schema",),
            emotion=llm_bridge.emotion(summary), llm=result.llm,
        )
        self.decide(stream, f"trace:{tid}", trace)
        for t in members:
            self.decide(stream, f"edge:{t.trace_id}:{tid}:schema_instance",
                        EdgeAdded(src=t.trace_id, dst=tid, kind="schema_instance", weight=d.SCHEMA_INSTANCE_WEIGHT))
        self.decide(stream, f"schema:{tid}",
                    SchemaCreated(schema_trace_id=tid, member_ids=tuple(ids), summary=summary, llm=result.llm))
        self.result.schemas += 1

    # ------------------------------------------------------------------ 4. conflict resolution

    def conflicts(self, keys: list[str]) -> None:
        book = self.fold.book
        personality = self.config.personality
        done = 0
        for key in self._bounded("conflicts", CONFLICT, sorted(keys)):
            src, dst = _key_pair(key)
            a, b = book.traces.get(src), book.traces.get(dst)
            if a is None or b is None or not (a.active and b.active):
                continue
            before = self.state.resolved.get(pair(src, dst))
            if before is not None and before != "keep_both":
                continue
            res = resolve(personality, Side(src, a.encoded_us, a.confidence, time_order(a)),
                          Side(dst, b.encoded_us, b.confidence, time_order(b)))
            if before == "keep_both" and res.loser is None:
                continue  # still kept both: nothing new to record
            newer, older = (a, b) if time_order(a) >= time_order(b) else (b, a)
            if res.loser is None:
                resolved = ConflictResolved(winner=newer.trace_id, loser=older.trace_id, resolution=res.how,
                                            note="both kept, discrepancy recorded at consolidation")
            else:
                loser = book.traces[res.loser]
                self.decide(loser.stream, f"edge:{res.winner}:{res.loser}:supersedes",
                            EdgeAdded(src=res.winner, dst=res.loser, kind="supersedes", weight=d.SUPERSEDES_EDGE_WEIGHT))
                resolved = ConflictResolved(winner=res.winner, loser=res.loser, resolution=res.how,
                                            note="resolved at consolidation")
            self.decide(book.traces[resolved.loser].stream,
                        f"conflict:{resolved.winner}:{resolved.loser}:{res.how}", resolved)
            done += 1
        self.result.conflicts += done

    # ------------------------------------------------------------------ 5. spaced repetition

    def review(self, due: list[str]) -> None:
        traces = self.fold.book.traces
        ready = sorted(
            (traces[tid] for tid in due
             if tid in traces and traces[tid].active and traces[tid].next_due_us <= self.now and worth_reviewing(traces[tid])),
            key=lambda t: (t.next_due_us, t.trace_id),
        )
        ready = [traces[tid] for tid in self._bounded("review", TRACE, [t.trace_id for t in ready])]
        for t in ready:
            hours = t.interval_s / 3_600
            self.decide(t.stream, f"review:{t.trace_id}:{self.now}",
                        TraceReinforced(trace_id=t.trace_id, reason=f"spaced repetition (review interval {hours:g} h)"))
            self.result.reinforced += 1


def may_cluster(fold: TraceFold, state: ConsolidationState, now_us: int) -> bool:
    """Whether schema integration may need embeddings through `now_us` (a schema check is due)."""
    return any(b <= now_us for _, b in state.schema_checks) or any(
        b <= now_us for tid, b in state.fresh.items() if tid in fold.book.traces and _schema_candidate(fold.book.traces[tid], state)
    )


# Rows of `_may_form`'s similarity products: it stops at the first block with an item that can form a cluster.
_MAY_FORM_ROWS = 64


def _may_form(vectors: np.ndarray, fresh: list[int], threshold: float, min_size: int) -> bool:
    """Whether a cluster can include one of the `fresh` items: one of them, or an item near one of them, has at
    least `min_size` − 1 items within `threshold` (the others formed none among themselves last time)."""
    v = np.asarray(vectors, dtype=np.float32)
    near_fresh = (v[fresh] @ v.T) >= threshold
    if (near_fresh.sum(axis=1) - 1 >= min_size - 1).any():  # a fresh item itself: its row is at hand
        return True
    touched = sorted(set(np.nonzero(near_fresh.any(axis=0))[0].tolist()) - set(fresh))
    for start in range(0, len(touched), _MAY_FORM_ROWS):  # the neighbours, a block at a time, until one can
        rows = touched[start : start + _MAY_FORM_ROWS]
        if (((v[rows] @ v.T) >= threshold).sum(axis=1) - 1 >= min_size - 1).any():  # without itself
            return True
    return False


def clusters(vectors: np.ndarray, threshold: float, min_size: int, max_size: int) -> list[list[int]]:
    """Greedy seed clustering: in order, each unassigned item gathers the unassigned items within
    `threshold` cosine of it (most similar first, up to `max_size` in all); a group of at least
    `min_size` becomes a cluster. Deterministic for the same vectors in the same order."""
    n = len(vectors)
    if n < min_size:
        return []
    sim = np.asarray(vectors, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32).T
    assigned = np.zeros(n, dtype=bool)
    out: list[list[int]] = []
    for i in range(n):
        if assigned[i]:
            continue
        near = np.nonzero((sim[i] >= threshold) & ~assigned)[0]
        near = near[near != i]
        if len(near) + 1 < min_size:
            continue
        ranked = sorted(near.tolist(), key=lambda j: (-float(sim[i, j]), j))
        group = [i] + ranked[: max_size - 1]
        if len(group) >= min_size:
            out.append(sorted(group))
            assigned[group] = True
    return out


def run(
    agent: str,
    fold: TraceFold,
    state: ConsolidationState,
    *,
    now_us: int,
    config: AgentConfig,
    mood: Pad,
    vectors: Vectors,
    summarize: Summarize,
    contradicts: Contradicts | None = None,
    count: bool = True,
    late: bool = False,
) -> RunResult:
    """Everything due through event time `now_us`, boundary by boundary in order (the module's rule);
    at each boundary the five steps in order, each folding its decisions before the next looks."""
    every = interval_us(config)
    threshold = config.memory.decay.prune_threshold
    previous = state.clock_us
    state.sync(fold, every, threshold)
    if not late:
        state.release_waiting(now_us)
    personality = config.personality.model_dump_json()
    if personality != state.personality:
        if state.personality:
            state.recheck_kept_conflicts(state.clock_us)
        state.personality = personality
    result = RunResult()
    while True:
        b = state.next_boundary()
        if b is None or b > now_us:
            break
        items = state.take(b)
        r = Run(agent, fold, state, b, config, mood, result)
        before = len(result.decisions)
        r.decay(items[TRACE])
        r.replay(items[FRESH])
        r.contradictions(items[FRESH], contradicts)
        state.sync(fold, every, threshold)  # contradictions found now are resolved at this boundary
        for key, at in list(state.conflict_due.items()):
            if at <= b and _pair_key(key) not in items[CONFLICT]:
                items[CONFLICT].append(_pair_key(key))
                del state.conflict_due[key]
        if late:  # schema checks wait until their discussion has moved past the boundary (see the module doc)
            for stream in [s for s in items[SCHEMA] if not state.passed(s, b)]:
                items[SCHEMA].remove(stream)
                state.wait_for_stream(stream, b)
        r.schemas(items[SCHEMA], vectors, summarize)
        r.conflicts(items[CONFLICT])
        r.review(items[TRACE])
        for tid in items[TRACE]:
            if state.due.get(tid, (None,))[0] == b:  # looked at, nothing to do yet (or done): its next check
                state.checked[tid] = b
                state.touched.add(tid)
        for d_ in result.decisions[before:]:
            if isinstance(d_.event, (TraceReinforced, TracePruned)):
                state.checked[d_.event.trace_id] = b
        state.sync(fold, every, threshold)
        if len(result.decisions) > before:
            result.runs += 1
            result.late += 1 if b <= previous else 0
            result.first_us = result.first_us or b
    state.clock_us = max(state.clock_us, now_us)
    if count:  # the active traces at `now` (a report's figure; a late arrival's catch-up does not need it)
        result.traces = sum(1 for t in fold.book.traces.values() if t.active and t.encoded_us <= now_us)
    return result


def steps_of(result: RunResult) -> dict[str, int]:
    return {"pruned": result.pruned, "edges": result.edges, "schemas": result.schemas, "conflicts": result.conflicts,
            "reinforced": result.reinforced}


def streams(result: RunResult) -> Sequence[str]:
    return list(dict.fromkeys(dd.stream for dd in result.decisions))

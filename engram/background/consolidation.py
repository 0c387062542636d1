"""One consolidation run at a clock tick: the five maintenance steps of the Wunderland guide.

    1. decay sweep            soft-delete traces whose Ebbinghaus strength is below the prune threshold (0.05)
    2. co-activation replay   edges between recent traces that share entities, or were encoded close in time
    3. schema integration     cluster related episodic traces of a discussion, summarise each cluster into a
                              semantic trace linked from its members (schema_instance)
    4. conflict resolution    scan contradiction edges, resolve them by confidence and personality
    5. spaced repetition      reinforce the traces whose review is due

Only traces encoded at or before the tick take part (ticks for an hour are recorded after the message
that crossed it, and that message's own traces belong to a later hour). Each step handles at most
`maxTracesPerRun` traces; a step that stops there is named in the report and goes on at the next run.
Constants: `engram.config.defaults` (REPLAY_*, SCHEMA_*, REVIEW_MIN_IMPORTANCE).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from engram.background.conflicts import Side, resolve
from engram.background.traces import TraceFold
from engram.cognitive import llm_bridge
from engram.cognitive.decay import decay_sweep, due_for_review, prunable
from engram.cognitive.encoding import encode, trace_id
from engram.cognitive.memory import entity_key
from engram.cognitive.model import US_PER_S, MemoryTrace, canonical_edge
from engram.cognitive.personality import Pad
from engram.config import defaults as d
from engram.config.agent import AgentConfig
from engram.events.base import Event
from engram.events.cognitive import ConflictResolved, EdgeAdded, SchemaCreated, TraceEncoded, TraceReinforced
from engram.events.envelope import Recorded

STEPS = ("decay", "replay", "schema", "conflicts", "review")
# Embeddings of traces, by trace id (the caller caches them): ids and contents in, (n, dim) unit vectors out.
Vectors = Callable[[list[str], list[str]], np.ndarray]
# The `summarize_schema` memory task: member contents in, a Result (value: the summary, llm: provenance) out.
Summarize = Callable[[list[str]], object]


@dataclass
class Decision:
    stream: str
    event_id: str
    event: Event


@dataclass
class RunResult:
    decisions: list[Decision] = field(default_factory=list)
    traces: int = 0
    pruned: int = 0
    edges: int = 0
    schemas: int = 0
    conflicts: int = 0
    reinforced: int = 0
    bounded: list[str] = field(default_factory=list)
    llm_calls: int = 0


@dataclass
class ConsolidationState:
    """What a consolidator remembers of an agent besides its traces: resolved contradiction pairs and
    which traces already belong to a schema."""

    resolved: dict[tuple[str, str], str] = field(default_factory=dict)  # pair -> resolution
    schematized: set[str] = field(default_factory=set)
    # Consolidation's own clock: the last tick it ran at. A trace that reaches it after ticks later than
    # its encoding (ticks are recorded after the message that crossed them, the traces of that message's
    # consequences may come later still) decays and falls due from its arrival, not from ticks it missed.
    clock_us: int = 0
    arrived: dict[str, int] = field(default_factory=dict)  # trace id -> the tick at which it arrived
    contradictions: set[tuple[str, str]] = field(default_factory=set)  # (src, dst) of contradicts edges
    # Per discussion, the schema candidates of the last run that found no cluster: the same set again is skipped.
    unclustered: dict[str, str] = field(default_factory=dict)

    def forget_missing(self, traces) -> None:
        """Drop what refers to traces that are gone (a forgotten discussion)."""
        self.resolved = {k: v for k, v in self.resolved.items() if k[0] in traces and k[1] in traces}
        self.schematized = {t for t in self.schematized if t in traces}
        self.arrived = {t: at for t, at in self.arrived.items() if t in traces}
        self.contradictions = {k for k in self.contradictions if k[0] in traces and k[1] in traces}
        self.unclustered = {}

    def observe(self, event: Event, ts_us: int) -> None:
        """Fold one event (recorded at event time `ts_us`) of the agent."""
        if isinstance(event, TraceEncoded):
            if self.clock_us and ts_us < self.clock_us and event.trace_id not in self.arrived:
                self.arrived[event.trace_id] = self.clock_us
        elif isinstance(event, ConflictResolved):
            self.resolved[pair(event.winner, event.loser)] = event.resolution
        elif isinstance(event, SchemaCreated):
            self.schematized.update(event.member_ids)
            self.schematized.add(event.schema_trace_id)
        elif isinstance(event, EdgeAdded) and event.kind == "schema_instance":
            self.schematized.add(event.src)
        elif isinstance(event, EdgeAdded) and event.kind == "contradicts":
            self.contradictions.add((event.src, event.dst))

    def as_of_arrival(self, t: MemoryTrace) -> MemoryTrace:
        """`t` as consolidation sees it: a late arrival's decay and review clock start at its arrival."""
        at = self.arrived.get(t.trace_id)
        if at is None or t.last_access_us >= at:
            return t
        return replace(t, last_access_us=at, next_due_us=max(t.next_due_us, at + int(t.interval_s * US_PER_S)))


def pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


# Traces the background processes themselves made long-term (the Reflector's, the schemas): rehearsed.
CONSOLIDATED_SOURCES = frozenset({"observation", "reflection", "schema"})


def worth_reviewing(t: MemoryTrace) -> bool:
    """A review schedule worth keeping: retrieved before, a flashbulb memory, important enough, or
    elevated to long-term memory by the Reflector or schema integration."""
    return (
        t.retrieval_count > 0 or t.flashbulb or t.importance >= d.REVIEW_MIN_IMPORTANCE
        or t.source_type in CONSOLIDATED_SOURCES
    )


class Run:
    """One run for one agent; `decide` records each event and folds it at once into `fold`."""

    def __init__(self, agent: str, fold: TraceFold, state: ConsolidationState, now_us: int, config: AgentConfig,
                 mood: Pad, tick_id: str):
        self.agent, self.fold, self.state, self.now, self.config, self.mood = agent, fold, state, now_us, config, mood
        self.bound = config.memory.consolidation.max_traces_per_run
        self.tick_id = tick_id
        self.result = RunResult()

    def eligible(self) -> list[MemoryTrace]:
        out = [t for t in self.fold.book.traces.values() if t.active and t.encoded_us <= self.now]
        out.sort(key=lambda t: (t.encoded_us, t.trace_id))
        return out

    def decide(self, stream: str, event_id: str, event: Event) -> None:
        self.result.decisions.append(Decision(stream, event_id, event))
        self.fold.apply(Recorded(seq=0, stream=stream, stream_version=0, agent=self.agent, ts_us=self.now, event=event))
        self.state.observe(event, self.now)

    def stream_of(self, tid: str) -> str:
        return self.fold.book.traces[tid].stream

    # ------------------------------------------------------------------ 1. decay sweep

    def decay(self) -> None:
        threshold = self.config.memory.decay.prune_threshold
        traces = [self.state.as_of_arrival(t) for t in self.eligible()]
        self.result.traces = len(traces)
        weak = sum(1 for t in traces if prunable(t, self.now, threshold))
        for ev in decay_sweep(traces, self.now, threshold=threshold, max_traces=self.bound):
            self.decide(self.stream_of(ev.trace_id), f"prune:{ev.trace_id}:{self.now}", ev)
            self.result.pruned += 1
        if weak > self.bound:
            self.result.bounded.append("decay")

    # ------------------------------------------------------------------ 2. co-activation replay

    def replay(self) -> None:
        since = self.now - d.REPLAY_WINDOW_S * US_PER_S
        recent = [t for t in self.eligible() if t.encoded_us > since][-self.bound :]
        graph = self.fold.book.graph
        candidates: list[tuple[MemoryTrace, MemoryTrace, str, float]] = []
        by_entity: dict[str, list[MemoryTrace]] = {}
        for t in recent:
            for name in dict.fromkeys(entity_key(e) for e in t.entities):
                by_entity.setdefault(name, []).append(t)
        for name in sorted(by_entity):
            members = by_entity[name][-d.REPLAY_MAX_PER_ENTITY :]
            for i, a in enumerate(members):
                for b in members[i + 1 :]:
                    candidates.append((a, b, "shared_entity", d.REPLAY_ENTITY_WEIGHT))
        for a, b in zip(recent, recent[1:]):
            if b.encoded_us - a.encoded_us <= d.REPLAY_TEMPORAL_GAP_S * US_PER_S:
                candidates.append((a, b, "temporal_sequence", d.REPLAY_TEMPORAL_WEIGHT))
        added = 0
        for a, b, kind, weight in candidates:
            if a.trace_id == b.trace_id or canonical_edge(a.trace_id, b.trace_id, kind) in graph.edges:
                continue
            if kind == "temporal_sequence" and (b.trace_id, a.trace_id, kind) in graph.edges:
                continue
            if added >= self.bound:
                self.result.bounded.append("replay")
                break
            edge = EdgeAdded(src=a.trace_id, dst=b.trace_id, kind=kind, weight=weight)
            self.decide(b.stream, f"edge:{a.trace_id}:{b.trace_id}:{kind}", edge)
            added += 1
        self.result.edges += added

    # ------------------------------------------------------------------ 3. schema integration

    def schemas(self, vectors: Vectors, summarize: Summarize) -> None:
        pool = [
            t for t in self.eligible()
            if t.trace_type == "episodic" and t.source_type != "schema" and t.trace_id not in self.state.schematized
        ]
        if len(pool) > self.bound:
            self.result.bounded.append("schema")
            pool = pool[-self.bound :]
        by_stream: dict[str, list[MemoryTrace]] = {}
        for t in pool:
            by_stream.setdefault(t.stream, []).append(t)
        for stream in sorted(by_stream):
            members = by_stream[stream]
            fingerprint = hashlib.sha1("\x1f".join(t.trace_id for t in members).encode()).hexdigest()
            if len(members) < d.SCHEMA_MIN_CLUSTER or self.state.unclustered.get(stream) == fingerprint:
                continue  # too few, or the same candidates that formed no cluster last time
            vecs = vectors([t.trace_id for t in members], [t.content for t in members])
            found = clusters(vecs, d.SCHEMA_SIMILARITY, d.SCHEMA_MIN_CLUSTER, d.SCHEMA_MAX_CLUSTER)
            if not found:
                self.state.unclustered[stream] = fingerprint
            for cluster in found:
                self._schema(stream, [members[i] for i in cluster], summarize)

    def _schema(self, stream: str, members: list[MemoryTrace], summarize: Summarize) -> None:
        members = sorted(members, key=lambda t: (t.encoded_us, t.trace_id))
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

    def conflicts(self) -> None:
        book = self.fold.book
        personality = self.config.personality
        done = 0
        for src, dst in sorted(self.state.contradictions):
            a, b = book.traces.get(src), book.traces.get(dst)
            if a is None or b is None or not (a.active and b.active) or max(a.encoded_us, b.encoded_us) > self.now:
                continue
            before = self.state.resolved.get(pair(src, dst))
            if before is not None and before != "keep_both":
                continue
            res = resolve(personality, Side(src, a.encoded_us, a.confidence), Side(dst, b.encoded_us, b.confidence))
            if before == "keep_both" and res.loser is None:
                continue  # still kept both: nothing new to record
            if done >= self.bound:
                self.result.bounded.append("conflicts")
                break
            newer, older = (a, b) if (a.encoded_us, a.trace_id) >= (b.encoded_us, b.trace_id) else (b, a)
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

    def review(self) -> None:
        due = due_for_review([self.state.as_of_arrival(t) for t in self.eligible() if worth_reviewing(t)], self.now)
        if len(due) > self.bound:
            self.result.bounded.append("review")
        for t in due[: self.bound]:
            hours = t.interval_s / 3_600
            self.decide(t.stream, f"review:{t.trace_id}:{self.now}",
                        TraceReinforced(trace_id=t.trace_id, reason=f"spaced repetition (review interval {hours:g} h)"))
            self.result.reinforced += 1


def may_cluster(fold: TraceFold, state: ConsolidationState, now_us: int) -> bool:
    """Whether schema integration may need embeddings at `now_us` (enough candidates in some discussion)."""
    counts: dict[str, int] = {}
    for t in fold.book.traces.values():
        if (t.active and t.trace_type == "episodic" and t.source_type != "schema" and t.encoded_us <= now_us
                and t.trace_id not in state.schematized):
            counts[t.stream] = counts.get(t.stream, 0) + 1
    return any(n >= d.SCHEMA_MIN_CLUSTER for n in counts.values())


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
        near = sorted(near.tolist(), key=lambda j: (-float(sim[i, j]), j))
        group = [i] + near[: max_size - 1]
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
    tick_id: str = "",
) -> RunResult:
    """The five steps at event time `now_us`, in order; each folds its decisions before the next looks."""
    state.clock_us = max(state.clock_us, now_us)
    r = Run(agent, fold, state, now_us, config, mood, tick_id)
    r.decay()
    r.replay()
    r.schemas(vectors, summarize)
    r.conflicts()
    r.review()
    traces = fold.book.traces
    state.arrived = {tid: at for tid, at in state.arrived.items() if tid in traces and traces[tid].active
                     and traces[tid].last_access_us < at}
    return r.result


def steps_of(result: RunResult) -> dict[str, int]:
    return {"pruned": result.pruned, "edges": result.edges, "schemas": result.schemas, "conflicts": result.conflicts,
            "reinforced": result.reinforced}


def streams(result: RunResult) -> Sequence[str]:
    return list(dict.fromkeys(dd.stream for dd in result.decisions))

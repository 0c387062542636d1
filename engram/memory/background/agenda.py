"""The Consolidator's agenda for one agent: what is due at which interval boundary (`engram.memory.background.consolidation`).

Four kinds of items, each keyed and kept current beside a heap of (boundary, kind, key) (stale heap entries are
skipped when they surface):

    TRACE     a trace's next decay-sweep or review boundary, on its own timeline (`engram.memory.background.schedule`)
    FRESH     a new trace's first boundary: co-activation replay and the contradiction check
    SCHEMA    a discussion whose schema candidates changed, at the first boundary the new ones take part in
    CONFLICT  a contradiction, at the first boundary both sides exist (once; a pair kept both ways is looked at
              again when the personality changes)

`sync` schedules what is new or changed since it last ran (traces are marked `touched` by `observe`).
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from engram.events.base import Event
from engram.events.envelope import Recorded
from engram.events.cognitive import (
    ConflictResolved,
    EdgeAdded,
    EdgesAdded,
    FactsIngested,
    SchemaCreated,
    TraceEncoded,
    TracePruned,
    TraceReinforced,
    TraceRetrieved,
    TracesReinforced,
)
from engram.memory.background import schedule
from engram.memory.background.traces import TraceFold
from engram.memory.cognitive.model import MemoryTrace

# Agenda item kinds, in step order at one boundary.
TRACE, FRESH, SCHEMA, CONFLICT = 0, 1, 2, 3



@dataclass
class ConsolidationState:
    """What a consolidator keeps of an agent besides its traces: the agenda (what is due when), resolved
    contradiction pairs, which traces already belong to a schema, and how far it has run."""

    resolved: dict[tuple[str, str], str] = field(default_factory=dict)  # pair -> resolution
    schematized: set[str] = field(default_factory=set)
    clock_us: int = 0  # the latest time consolidation has run through
    contradictions: set[tuple[str, str]] = field(default_factory=set)  # (src, dst) of contradicts edges
    # Per discussion, the schema candidates of the last check that found no cluster: the same set again is skipped.
    unclustered: dict[str, str] = field(default_factory=dict)
    # Per discussion, the schema candidates the last check saw: none of them can form a cluster among themselves
    # any more (the greedy clustering took every cluster it found), so a new cluster needs a new candidate.
    schema_seen: dict[str, frozenset[str]] = field(default_factory=dict)
    # The agenda: a heap of (boundary, kind, key) with the current entry of each key beside it (others are stale).
    heap: list[tuple[int, int, str]] = field(default_factory=list)
    due: dict[str, tuple[int, str]] = field(default_factory=dict)  # trace -> (boundary, "prune" | "review")
    checked: dict[str, int] = field(default_factory=dict)  # trace -> the last boundary it was checked at
    fresh: dict[str, int] = field(default_factory=dict)  # new trace -> its first boundary (replay, contradictions)
    schema_checks: set[tuple[str, int]] = field(default_factory=set)  # (discussion, boundary)
    # Schema checks a late arrival's catch-up found due before their discussion had moved past them (see `run`):
    # they wait for a later trace of the discussion, or for the next tick.
    schema_waiting: set[tuple[str, int]] = field(default_factory=set)
    stream_latest: dict[str, int] = field(default_factory=dict)  # discussion -> its latest trace from messages
    # A discussion's ingest progress, as the events arrive: its messages auto-ingest has yet to handle (seqs), and the
    # traces its FactsIngested named that have not arrived yet. Both empty: its pool is complete as far as the log goes.
    ingesting: dict[str, set[int]] = field(default_factory=dict)
    awaiting: dict[str, set[str]] = field(default_factory=dict)
    arrived: set[str] = field(default_factory=set)  # traces whose TraceEncoded has arrived (held or folded)
    conflict_due: dict[tuple[str, str], int] = field(default_factory=dict)  # contradicts edge -> boundary
    conflicts_seen: set[tuple[str, str]] = field(default_factory=set)  # contradicts edges ever scheduled
    known: set[str] = field(default_factory=set)  # traces ever scheduled
    touched: set[str] = field(default_factory=set)  # traces whose state changed since they were scheduled
    timeline: list[tuple[int, str]] = field(default_factory=list)  # (encoded, trace) of every trace, sorted
    every_us: int = 0  # the interval the agenda was computed with
    personality: str = ""  # the personality contradictions were last resolved under (kept pairs are rechecked on a change)

    def forget_missing(self, traces: Mapping[str, MemoryTrace]) -> None:
        """Drop what refers to traces that are gone (a forgotten discussion)."""
        self.resolved = {k: v for k, v in self.resolved.items() if k[0] in traces and k[1] in traces}
        self.schematized = {t for t in self.schematized if t in traces}
        self.contradictions = {k for k in self.contradictions if k[0] in traces and k[1] in traces}
        self.conflict_due = {k: b for k, b in self.conflict_due.items() if k in self.contradictions}
        self.conflicts_seen = {k for k in self.conflicts_seen if k in self.contradictions}
        self.due = {t: v for t, v in self.due.items() if t in traces}
        self.checked = {t: v for t, v in self.checked.items() if t in traces}
        self.fresh = {t: v for t, v in self.fresh.items() if t in traces}
        self.known = {t for t in self.known if t in traces}
        self.touched = {t for t in self.touched if t in traces}
        self.timeline = [x for x in self.timeline if x[1] in traces]
        self.unclustered = {}
        self.schema_seen = {}
        self.stream_latest = {}
        for t in traces.values():
            self._note_stream_time(t)

    def observe(self, event: Event, ts_us: int) -> None:
        """Fold one event (recorded at event time `ts_us`) of the agent: what it changes is rescheduled."""
        if isinstance(event, TraceEncoded):
            self.touched.add(event.trace_id)
            for link in event.links:
                self._edge(link.src, event.trace_id, link.kind)
        elif isinstance(event, (TraceReinforced, TracePruned)):
            self.touched.add(event.trace_id)
        elif isinstance(event, TracesReinforced):
            self.touched.update(item.trace_id for item in event.items)
        elif isinstance(event, TraceRetrieved):
            self.touched.update(event.trace_ids)
        elif isinstance(event, ConflictResolved):
            self.resolved[pair(event.winner, event.loser)] = event.resolution
            self.touched.update((event.winner, event.loser))
        elif isinstance(event, SchemaCreated):
            self.schematized.update(event.member_ids)
            self.schematized.add(event.schema_trace_id)
        elif isinstance(event, EdgeAdded):
            self._edge(event.src, event.dst, event.kind)
        elif isinstance(event, EdgesAdded):
            for edge in event.edges:
                self._edge(edge.src, edge.dst, edge.kind)

    def _edge(self, src: str, dst: str, kind: str) -> None:
        if kind == "schema_instance":
            self.schematized.add(src)
        elif kind == "contradicts":
            self.contradictions.add((src, dst))
            self.touched.update((src, dst))
            self.conflict_due.pop((src, dst), None)  # scheduled when both sides are known

    # ------------------------------------------------------------------ the agenda

    def _push(self, boundary: int, kind: int, key: str) -> None:
        heapq.heappush(self.heap, (boundary, kind, key))

    def sync(self, fold: TraceFold, every_us: int, threshold: float) -> None:
        """Schedule traces that are new or changed since they were scheduled (and everything, for a new interval)."""
        traces = fold.book.traces
        if every_us != self.every_us:
            self.every_us = every_us
            self.touched |= set(self.known) | set(traces)
            self.heap = []
            for tid, b in self.fresh.items():
                self._push(b, FRESH, tid)
            for stream, b in self.schema_checks:
                self._push(b, SCHEMA, stream)
            for key, b in self.conflict_due.items():
                self._push(b, CONFLICT, _pair_key(key))
        # Traces folded without `observe` (a direct fold) are found by count: known ones are never dropped alone.
        new = [tid for tid in traces if tid not in self.known] if len(self.known) < len(traces) else []
        for tid in sorted(self.touched | set(new)):
            t = traces.get(tid)
            if t is None:
                continue
            if tid not in self.known:
                self.known.add(tid)
                bisect.insort(self.timeline, (t.encoded_us, tid))
                self._note_stream_time(t)
                first = schedule.ceil_boundary(t.encoded_us, every_us)
                self.fresh[tid] = first
                self._push(first, FRESH, tid)
                if _schema_candidate(t, self):
                    if (t.stream, first) not in self.schema_checks:
                        self.schema_checks.add((t.stream, first))
                        self._push(first, SCHEMA, t.stream)
            if not t.active:
                self.due.pop(tid, None)
                continue
            b, what = schedule.next_check(t, self.checked.get(tid, 0), every_us, threshold)
            if self.due.get(tid) != (b, what):
                self.due[tid] = (b, what)
                self._push(b, TRACE, tid)
        self.touched = set()
        for key in sorted(self.contradictions - self.conflicts_seen):
            if pair(*key) in self.resolved:
                continue  # resolved at the turn (a kept pair is looked at again after a personality change)
            older, newer = traces.get(key[0]), traces.get(key[1])
            if older is None or newer is None:
                continue
            at = schedule.ceil_boundary(max(older.encoded_us, newer.encoded_us), every_us)
            self.conflicts_seen.add(key)
            self.conflict_due[key] = at
            self._push(at, CONFLICT, _pair_key(key))

    def _note_stream_time(self, t: MemoryTrace) -> None:
        """A discussion's time is that of its latest trace made from its messages (schemas do not move it); a
        schema check waiting for the discussion to move past its boundary is released when it has."""
        if t.source_type in schedule.CONSOLIDATED_SOURCES:
            return
        if t.encoded_us > self.stream_latest.get(t.stream, -1):
            self.stream_latest[t.stream] = t.encoded_us
            for key in sorted(k for k in self.schema_waiting if k[0] == t.stream and k[1] < t.encoded_us):
                self.schema_waiting.discard(key)
                self.schema_checks.add(key)
                self._push(key[1], SCHEMA, key[0])

    def passed(self, stream: str, b: int) -> bool:
        """Whether `stream`'s pool at boundary `b` is complete: a trace of it from after `b` has arrived (a discussion's
        messages arrive in their order, so everything of it up to `b` is there), or auto-ingest has handled every
        message of it appended so far and its traces have arrived (`complete`)."""
        return self.stream_latest.get(stream, -1) > b or self.complete(stream)

    # ------------------------------------------------------------------ a discussion's ingest progress

    def message_arrived(self, stream: str, seq: int) -> None:
        """A message auto-ingest will handle (one FactsIngested each)."""
        self.ingesting.setdefault(stream, set()).add(seq)

    def ingest_arrived(self, rec: Recorded) -> None:
        """Bookkeeping of auto-ingest's events as they arrive (whether or not they are folded yet)."""
        e = rec.event
        if isinstance(e, FactsIngested):
            open_ = self.ingesting.get(rec.stream)
            if open_ is not None:
                open_.discard(e.source_seq)
            missing = {t for t in e.trace_ids if t not in self.arrived}
            if missing:
                self.awaiting.setdefault(rec.stream, set()).update(missing)
        elif isinstance(e, TraceEncoded):
            self.arrived.add(e.trace_id)
            waiting = self.awaiting.get(rec.stream)
            if waiting:
                waiting.discard(e.trace_id)

    def settled(self, stream: str) -> bool:
        """Whether nothing of `stream` is known to be on its way: auto-ingest has handled every message of it appended
        so far and the traces it named have arrived (true of a discussion whose messages auto-ingest does not handle)."""
        return not self.ingesting.get(stream) and not self.awaiting.get(stream)

    def complete(self, stream: str) -> bool:
        """Whether `stream`'s messages are followed by auto-ingest and it has handled all of them (`settled`)."""
        return stream in self.ingesting and self.settled(stream)

    def forget_stream(self, stream: str) -> None:
        self.ingesting.pop(stream, None)
        self.awaiting.pop(stream, None)
        self.schema_waiting = {k for k in self.schema_waiting if k[0] != stream}

    def wait_for_stream(self, stream: str, b: int) -> None:
        self.schema_waiting.add((stream, b))

    def release_waiting(self, through_us: int) -> None:
        """A tick: every waiting schema check at or before `through_us` is due again (whatever has arrived is all
        the tick's time knows of)."""
        for key in sorted(k for k in self.schema_waiting if k[1] <= through_us):
            self.schema_waiting.discard(key)
            self.schema_checks.add(key)
            self._push(key[1], SCHEMA, key[0])

    def recheck_kept_conflicts(self, after_us: int) -> None:
        """Contradictions kept both ways are looked at again at the next boundary (the personality may have changed)."""
        every = self.every_us or 1
        for key in sorted(self.contradictions):
            if self.resolved.get(pair(*key)) == "keep_both":
                at = max(schedule.ceil_boundary(after_us, every), self.conflict_due.get(key, 0))
                self.conflict_due[key] = at
                self._push(at, CONFLICT, _pair_key(key))

    def next_boundary(self) -> int | None:
        """The earliest boundary with something (still) due, dropping stale agenda entries."""
        while self.heap:
            b, kind, key = self.heap[0]
            if self._current(b, kind, key):
                return b
            heapq.heappop(self.heap)
        return None

    def _current(self, b: int, kind: int, key: str) -> bool:
        if kind == TRACE:
            return self.due.get(key, (None,))[0] == b
        if kind == FRESH:
            return self.fresh.get(key) == b
        if kind == SCHEMA:
            return (key, b) in self.schema_checks
        return self.conflict_due.get(_key_pair(key)) == b

    def take(self, b: int) -> dict[int, list[str]]:
        """Every current agenda item at boundary `b`, by kind, removed from the agenda."""
        items: dict[int, list[str]] = {TRACE: [], FRESH: [], SCHEMA: [], CONFLICT: []}
        while self.heap and self.heap[0][0] == b:
            _, kind, key = heapq.heappop(self.heap)
            if self._current(b, kind, key) and key not in items[kind]:
                items[kind].append(key)
        for tid in items[FRESH]:
            del self.fresh[tid]
        for stream in items[SCHEMA]:
            self.schema_checks.discard((stream, b))
        for key in items[CONFLICT]:
            del self.conflict_due[_key_pair(key)]
        return items

    def defer(self, kind: int, keys: Iterable[str], b: int) -> None:
        """Items a bounded step could not take at `b`: the next boundary."""
        nxt = b + self.every_us
        for key in keys:
            if kind == TRACE and key in self.due:
                self.due[key] = (nxt, self.due[key][1])
            elif kind == FRESH:
                self.fresh[key] = nxt
            elif kind == SCHEMA:
                self.schema_checks.add((key, nxt))
            elif kind == CONFLICT:
                self.conflict_due[_key_pair(key)] = nxt
            self._push(nxt, kind, key)

    def window(self, fold: TraceFold, start_us: int, end_us: int) -> list[MemoryTrace]:
        """Traces encoded in (start_us, end_us] that were active at end_us, in encoding order."""
        lo = bisect.bisect_right(self.timeline, (start_us, "\uffff"))
        hi = bisect.bisect_right(self.timeline, (end_us, "\uffff"))
        out = []
        for _, tid in self.timeline[lo:hi]:
            t = fold.book.traces.get(tid)
            if t is not None and active_at(t, end_us):
                out.append(t)
        return out


def pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _pair_key(key: tuple[str, str]) -> str:
    return f"{key[0]}\x1f{key[1]}"


def _key_pair(key: str) -> tuple[str, str]:
    a, b = key.split("\x1f")
    return a, b


def active_at(t: MemoryTrace, at_us: int) -> bool:
    """Active at event time `at_us`: active now, or deactivated only later (a late arrival's catch-up)."""
    return t.encoded_us <= at_us and (t.active or (t.deleted_us is not None and t.deleted_us > at_us))


def _schema_candidate(t: MemoryTrace, state: ConsolidationState) -> bool:
    return t.trace_type == "episodic" and t.source_type != "schema" and t.trace_id not in state.schematized

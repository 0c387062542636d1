"""The fold of cognitive events into one agent's traces and trace graph.

The `memory_traces` projection, the trace reader that serves recall, and the policies that need
to know what an agent remembers all fold the same events with this class, so they agree.

    TraceEncoded       a new trace, then the edges into it that it carries (`links`)
    TraceRetrieved     each returned trace is reinforced; the best few the query found strengthen co-activation edges
    TraceReinforced    a reinforcement outside retrieval (spaced-repetition review); TracesReinforced: several
    TracePruned        soft deletion
    EdgeAdded / EdgesAdded (several) / EdgeStrengthened
    FactsIngested      a fact skipped as a duplicate verifies the trace it duplicates
    Reflected          likewise, a reflection's candidate that restates an active trace
    ConflictResolved   the loser is contradicted by the winner, and soft-deleted unless both are kept
    MoodChanged        the agent's current mood
    DiscussionForgotten / AgentForgotten   everything derived from that stream or agent is dropped
    MemoryEdited       a user's new text (and metadata) of one trace supersedes the old
    MemoryDeleted      one trace is dropped, as forgetting drops it
    MessageEdited / MessageRemoved   the traces made from the message's old words are superseded: closed at the
                       change (`valid_to`, `superseded_by` "edit of message <id>" / "removal of message <id>") and
                       soft-deleted, so recall answers from what the message says now and, `as_of` before the
                       change, from what it said then. A trace made from the old words that arrives after the
                       change (its cause is older than the change) is superseded as it is encoded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from engram.config import defaults as d
from engram.events import cognitive as ev
from engram.events.background import Reflected
from engram.events.control import AgentForgotten, DiscussionForgotten
from engram.events.envelope import Recorded
from engram.events.memory_edits import MemoryDeleted, MemoryEdited
from engram.events.messages import MessageEdited, MessageRemoved
from engram.kernel.records import Column
from engram.memory.cognitive.decay import apply_reinforcement, reinforce, strength_at
from engram.memory.cognitive.graph import Edge, TraceGraph
from engram.memory.cognitive.indexing import asks
from engram.memory.cognitive.model import MemoryTrace, US_PER_S, canonical_edge
from engram.memory.cognitive.personality import Pad

INTERESTS = frozenset(
    {
        "TraceEncoded",
        "TraceRetrieved",
        "TraceReinforced",
        "TracesReinforced",
        "TracePruned",
        "EdgeAdded",
        "EdgesAdded",
        "EdgeStrengthened",
        "FactsIngested",
        "Reflected",
        "ConflictResolved",
        "MoodChanged",
        "DiscussionForgotten",
        "AgentForgotten",
        "MemoryEdited",
        "MemoryDeleted",
        "MessageEdited",
        "MessageRemoved",
    }
)


# A `TraceEncoded` becomes a `MemoryTrace` field by field: the same names, these renamed, and these the event
# alone carries (tests/memory/cognitive/test_declarations.py fails on an event field that is none of the three). The
# event is the write side's contract and the trace the read model's, so neither is derived from the other.
TRACE_FROM_EVENT = {"strength": "encoding_strength"}
EVENT_ONLY = frozenset({"llm", "links"})


def trace_of(rec: Recorded, e: ev.TraceEncoded) -> MemoryTrace:
    """The trace `e` encodes, as of its event (`rec`): its time is the encoding, the first access and the start of
    its first review interval."""
    shared = {TRACE_FROM_EVENT.get(name, name): getattr(e, name) for name in e.__struct_fields__ if name not in EVENT_ONLY}
    return MemoryTrace(**shared, agent=rec.agent, stream=rec.stream, encoded_us=rec.ts_us, last_access_us=rec.ts_us,
                       next_due_us=rec.ts_us + int(e.interval_s * US_PER_S), last_seq=rec.seq, asks=asks(e.content),
                       valid_from_us=rec.ts_us)


@dataclass(frozen=True)
class Change:
    """One step in a trace's life, as the `trace_changes` table shows it (after its `agent`; `engram.kernel.records`)."""

    trace_id: str
    seq: int
    ts_us: Annotated[int, Column("ts", timestamp=True)]
    change: str  # encoded | retrieved | reinforced | verified | pruned | superseded | edited
    strength_before: float  # S(t) at the event, before the change
    strength_after: float
    encoding_strength: float
    stability_s: float
    interval_s: float
    retrieval_count: int
    detail: str = ""


@dataclass
class Applied:
    """What one event changed, for whoever maintains an index beside the book."""

    added: list[MemoryTrace] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # soft-deleted or forgotten
    forgotten: list[str] = field(default_factory=list)  # gone entirely (forgetting)
    edited: list[MemoryTrace] = field(default_factory=list)  # a new text: its index entries change


class TraceBook:
    def __init__(self, agent: str, *, track: bool = False):
        self.agent = agent
        self.traces: dict[str, MemoryTrace] = {}
        self.graph = TraceGraph()
        self.mood: Pad | None = None  # None until a MoodChanged: the configured baseline applies
        self.last_seq = 0
        self.track = track  # keep dirty sets and the change log (for the projection)
        self.changes: list[Change] = []
        self.dirty_traces: set[str] = set()
        self.dirty_edges: set[tuple[str, str, str]] = set()
        self.forgotten_traces: set[str] = set()
        self.removed_edges: set[tuple[str, str, str]] = set()
        # The latest encoding time of any trace folded (forgotten ones included): no trace is newer.
        self.latest_encoded_us = 0
        # message id -> (seq, event time, label) of its latest edit or removal: what its traces are superseded by.
        self.message_changes: dict[str, tuple[int, int, str]] = {}
        # trace id -> (event time, label) of the message change that closed it (see `close_validity`).
        self.closed_by_message: dict[str, tuple[int, str]] = {}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("message_changes", {})  # a book pickled before messages could be edited
        self.__dict__.setdefault("closed_by_message", {})
        if "latest_encoded_us" not in state:  # a book pickled before it was kept
            self.latest_encoded_us = max((t.encoded_us for t in self.traces.values()), default=0)
        for t in self.traces.values():
            if "asks" not in t.__dict__:  # a trace pickled before the flag: computed as the fold computes it
                t.asks = asks(t.content)
            if "valid_from_us" not in t.__dict__:  # pickled before validity in time: derived as the fold derives it
                t.valid_from_us = t.encoded_us
        for t in self.traces.values():
            if "valid_to_us" not in t.__dict__:
                self.close_validity(t)

    # ------------------------------------------------------------------ reading

    def active(self) -> list[MemoryTrace]:
        return [t for t in self.traces.values() if t.active]

    def get(self, trace_id: str) -> MemoryTrace | None:
        return self.traces.get(trace_id)

    # ------------------------------------------------------------------ folding

    def apply(self, rec: Recorded) -> Applied:
        e = rec.event
        out = Applied()
        if isinstance(e, ev.TraceEncoded):
            self._encoded(rec, e, out)
            for link in e.links:
                self._edge(link.src, e.trace_id, link.kind, link.weight, rec)
        elif isinstance(e, ev.TraceRetrieved):
            self._retrieved(rec, e)
        elif isinstance(e, ev.TraceReinforced):
            self._reinforced(e.trace_id, e.reason, rec)
        elif isinstance(e, ev.TracesReinforced):
            for item in e.items:
                self._reinforced(item.trace_id, item.reason, rec)
        elif isinstance(e, ev.TracePruned):
            self._deactivate(e.trace_id, rec, "pruned", e.reason, out)
        elif isinstance(e, ev.EdgeAdded):
            self._edge(e.src, e.dst, e.kind, e.weight, rec)
        elif isinstance(e, ev.EdgesAdded):
            for edge in e.edges:
                self._edge(edge.src, edge.dst, edge.kind, edge.weight, rec)
        elif isinstance(e, ev.EdgeStrengthened):
            if e.src in self.traces and e.dst in self.traces:
                self._edge_changed(self.graph.strengthen(e.src, e.dst, e.kind, e.delta, rec.seq), e.src, e.dst)
        elif isinstance(e, ev.FactsIngested):
            for skipped in e.skipped:
                if skipped.duplicate_of:
                    self._verify(skipped.duplicate_of, rec, f"restated at seq {e.source_seq}")
        elif isinstance(e, Reflected):
            for tid in e.duplicates:
                self._verify(tid, rec, "restated by a reflection")
        elif isinstance(e, ev.ConflictResolved):
            self._contradicted(e.loser, e.winner, rec)
            if e.resolution != "keep_both":
                self._deactivate(e.loser, rec, "superseded", f"{e.resolution}: {e.winner}", out)
        elif isinstance(e, ev.MoodChanged):
            self.mood = Pad(e.valence, e.arousal, e.dominance)
        elif isinstance(e, DiscussionForgotten):
            self._forget([tid for tid, t in self.traces.items() if t.stream == e.discussion_id], out)
        elif isinstance(e, AgentForgotten):
            if e.agent_id == self.agent:
                self._forget(list(self.traces), out)
                self.mood = None
        elif isinstance(e, MemoryEdited):
            if e.kind == "trace":
                self._edited(rec, e, out)
        elif isinstance(e, MemoryDeleted):
            if e.kind == "trace":
                self._forget([e.memory_id], out)
        elif isinstance(e, (MessageEdited, MessageRemoved)):
            label = f"{'edit' if isinstance(e, MessageEdited) else 'removal'} of message {e.message_id}"
            self.message_changes[e.message_id] = (rec.seq, rec.ts_us, label)
            for t in [t for t in self.traces.values() if e.message_id in t.source_message_ids]:
                self._superseded_by_message(t, rec, rec.ts_us, label, out)
        self.last_seq = max(self.last_seq, rec.seq)
        return out

    def _encoded(self, rec: Recorded, e: ev.TraceEncoded, out: Applied) -> None:
        if e.trace_id in self.traces:
            return  # encoded once; a repeated id is the same memory
        t = trace_of(rec, e)
        self.traces[t.trace_id] = t
        self.latest_encoded_us = max(self.latest_encoded_us, t.encoded_us)
        self.forgotten_traces.discard(t.trace_id)
        self._log(t, rec, "encoded", e.strength, "flashbulb" if e.flashbulb else "")
        out.added.append(t)
        # Made from words a message no longer says (decided before the change, recorded after it): superseded now.
        changed = [self.message_changes[m] for m in t.source_message_ids if m in self.message_changes]
        later = [c for c in changed if rec.causation is not None and rec.causation < c[0]]
        if later:
            _, at, label = min(later)
            self._superseded_by_message(t, rec, at, label, out)

    def _superseded_by_message(self, t: MemoryTrace, rec: Recorded, at_us: int, label: str, out: Applied) -> None:
        """`t` was made from a message that was edited or removed at `at_us`: true until then, soft-deleted."""
        if t.trace_id in self.closed_by_message:
            return
        self.closed_by_message[t.trace_id] = (max(at_us, t.valid_from_us), label)
        self.close_validity(t)
        self._dirty(t.trace_id)
        self._deactivate(t.trace_id, rec, "superseded", label, out)

    def _edited(self, rec: Recorded, e: MemoryEdited, out: Applied) -> None:
        """A user's edit: the trace keeps its id, strength and links; its text (and metadata) are the new ones."""
        t = self.traces.get(e.memory_id)
        if t is None:
            return
        if e.metadata is not None:
            t.metadata = tuple(sorted(e.metadata.items()))
        if e.content is not None and e.content != t.content:
            t.content = e.content
            t.asks = asks(e.content)
            out.edited.append(t)
        t.last_seq = rec.seq
        self._log(t, rec, "edited", strength_at(t, rec.ts_us), "")

    def _retrieved(self, rec: Recorded, e: ev.TraceRetrieved) -> None:
        """Every returned trace is reinforced; the best HEBBIAN_TOP that the query itself found wire together.

        A trace that was returned only because spreading activation reached it did not respond to the
        query: wiring it to the query's matches would let the graph strengthen its own edges (activation
        → retrieval → a stronger edge → more activation), so co-activation edges only ever join traces
        that each matched some query.
        """
        fired = []
        for i, tid in enumerate(e.trace_ids):
            t = self._live(tid)
            if t is not None:
                self._reinforce(t, rec, "retrieved", e.query[:200])
                cued = i >= len(e.via) or e.via[i] != "activation"
                fired.append((tid, cued))
        together = [tid for tid, cued in fired[: d.HEBBIAN_TOP] if cued]
        for edge in self.graph.hebbian(together, rec.seq):
            self._edge_changed(edge, edge.src, edge.dst)

    def _edge(self, src: str, dst: str, kind: str, weight: float, rec: Recorded) -> None:
        if src in self.traces and dst in self.traces:
            edge = self.graph.add(src, dst, kind, weight, rec.seq)
            self._edge_changed(edge, src, dst)
            if kind == "contradicts":
                self._contradicted(dst, src, rec)

    def _reinforced(self, trace_id: str, reason: str, rec: Recorded) -> None:
        t = self._live(trace_id)
        if t is not None:
            self._reinforce(t, rec, "reinforced", reason)

    def _reinforce(self, t: MemoryTrace, rec: Recorded, change: str, detail: str) -> None:
        r = reinforce(t, rec.ts_us)
        apply_reinforcement(t, r)
        t.last_seq = rec.seq
        self._log(t, rec, change, r.strength_before, detail)

    def _deactivate(self, trace_id: str, rec: Recorded, change: str, reason: str, out: Applied) -> None:
        t = self._live(trace_id)
        if t is None:
            return
        before = strength_at(t, rec.ts_us)
        t.active = False
        t.deleted_us = rec.ts_us
        t.deleted_reason = reason
        t.last_seq = rec.seq
        self._log(t, rec, change, before, reason, after=before)
        out.removed.append(trace_id)

    def _contradicted(self, trace_id: str, by: str, rec: Recorded) -> None:
        t = self.traces.get(trace_id)
        if t is not None and by not in t.contradicted_by:
            t.contradicted_by = tuple(sorted((*t.contradicted_by, by)))
            self.close_validity(t)
            t.last_seq = rec.seq
            self._dirty(t.trace_id)

    def close_validity(self, t: MemoryTrace) -> None:
        """Validity in time: a trace stops being true when a newer trace contradicts it (a correction, a later
        contradicting fact: `contradicted_by`), at the moment the conversation said the newer one (its valid_from).
        A contradictor from before it (the older side won, `prefer_confidence`) closes nothing: it was never a change."""
        newer = sorted((c.valid_from_us, c.trace_id) for c in (self.traces.get(x) for x in t.contradicted_by)
                       if c is not None and c.valid_from_us > t.valid_from_us)
        # Or its message was edited or removed (`_superseded_by_message`): whichever came first.
        by_message = self.__dict__.get("closed_by_message", {}).get(t.trace_id)
        if by_message is not None:
            newer = sorted(newer + [by_message])
        t.valid_to_us, t.superseded_by = newer[0] if newer else (None, "")

    def _forget(self, ids: list[str], out: Applied) -> None:
        for tid in ids:
            t = self.traces.pop(tid, None)
            if t is None:
                continue
            for edge in self.graph.remove_node(tid):
                key = canonical_edge(edge.src, edge.dst, edge.kind)
                self.dirty_edges.discard(key)
                if self.track:
                    self.removed_edges.add(key)
                for other in (edge.src, edge.dst):
                    peer = self.traces.get(other)
                    if peer is not None:
                        peer.links.discard(tid)
                        self._dirty(other)
            if self.track:
                self.forgotten_traces.add(tid)
                self.dirty_traces.discard(tid)
            out.forgotten.append(tid)
            self.closed_by_message.pop(tid, None)
            if t.active:
                out.removed.append(tid)
        if self.track and ids:
            gone = set(ids)
            self.changes = [c for c in self.changes if c.trace_id not in gone]

    # ------------------------------------------------------------------ bookkeeping

    def _live(self, trace_id: str | None) -> MemoryTrace | None:
        t = self.traces.get(trace_id) if trace_id else None
        return t if t is not None and t.active else None

    def _edge_changed(self, edge: Edge | None, a: str, b: str) -> None:
        if edge is None:
            return
        for x, y in ((a, b), (b, a)):
            t = self.traces.get(x)
            if t is not None and y not in t.links:
                t.links.add(y)
                self._dirty(x)
        if self.track:
            self.dirty_edges.add(canonical_edge(edge.src, edge.dst, edge.kind))

    def _dirty(self, trace_id: str) -> None:
        if self.track:
            self.dirty_traces.add(trace_id)

    def _verify(self, tid: str, rec: Recorded, detail: str) -> None:
        t = self._live(tid)
        if t is not None:
            t.verification_count += 1
            t.last_seq = rec.seq
            self._log(t, rec, "verified", strength_at(t, rec.ts_us), detail)

    def _log(self, t: MemoryTrace, rec: Recorded, change: str, before: float, detail: str, after: float | None = None) -> None:
        self._dirty(t.trace_id)
        if not self.track:
            return
        self.changes.append(
            Change(
                trace_id=t.trace_id,
                seq=rec.seq,
                ts_us=rec.ts_us,
                change=change,
                strength_before=before,
                strength_after=strength_at(t, rec.ts_us) if after is None else after,
                encoding_strength=t.encoding_strength,
                stability_s=t.stability_s,
                interval_s=t.interval_s,
                retrieval_count=t.retrieval_count,
                detail=detail,
            )
        )

    def take_changes(self) -> tuple[list[Change], set[str], set[str], set[tuple[str, str, str]], set[tuple[str, str, str]]]:
        """Pending (changes, dirty traces, forgotten traces, dirty edges, removed edges); resets them."""
        out = (self.changes, self.dirty_traces, self.forgotten_traces, self.dirty_edges, self.removed_edges)
        self.changes, self.dirty_traces, self.forgotten_traces = [], set(), set()
        self.dirty_edges, self.removed_edges = set(), set()
        return out

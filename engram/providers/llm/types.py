"""The values memory tasks take and return: plain msgspec structs, no I/O.

Observation notes are `engram.events.background.ObservationNote` itself, so that an Observer
copies them into `ObservationsRecorded` unchanged.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

from engram.events.provenance import LlmCall

T = TypeVar("T")

OBSERVATION_TYPES = ("factual", "emotional", "commitment", "preference", "creative", "correction")
FACT_CATEGORIES = (
    "user_preference",
    "episodic",
    "goal",
    "knowledge",
    "correction",
    "action_item",
    "emotional_context",
)
TRACE_TYPES = ("episodic", "semantic", "procedural", "prospective", "relational")
CONFLICT_RESOLUTIONS = ("prefer_newer", "keep_both", "prefer_confidence")


class ChatLine(msgspec.Struct, frozen=True, kw_only=True):
    """One message as a task sees it. `ts_us` is its event time (microseconds since the epoch)."""

    role: str
    content: str
    seq: int
    ts_us: int
    message_id: str = ""
    name: str | None = None  # the speaker's name when known

    @property
    def speaker(self) -> str:
        return self.name or self.role.capitalize()


class Result(msgspec.Struct, Generic[T], frozen=True):
    """What every memory task returns: its value and where the value came from.

    When `llm.error` is set the call failed and `value` is a labelled fallback (see `llm.fallback`).
    """

    value: T
    llm: LlmCall
    # The failure was an outage (the endpoint unreachable, overloaded, rate limiting, timing out), not the
    # input's fault: memory creation waits and tries again rather than keep the fallback (never recorded).
    transient: bool = False

    @property
    def failed(self) -> bool:
        return self.llm.error is not None


class StructuredMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A searchable vector memory (WilmerAI QualityMemory): maps onto `VectorMemoryStored`."""

    title: str
    summary: str
    entities: tuple[str, ...] = ()
    key_phrases: tuple[str, ...] = ()
    sentiment: str | None = None  # positive | negative | neutral | mixed
    topics: tuple[str, ...] = ()


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    """An auto-ingest fact: maps onto `FactIngested` (category, content, importance, entities, source_seq)."""

    category: str
    content: str
    importance: float
    source_seq: int
    entities: tuple[str, ...] = ()
    message_id: str = ""


class TraceBrief(msgspec.Struct, frozen=True, kw_only=True):
    """An existing long-term trace, shown to the reflector so it can flag what a note contradicts."""

    trace_id: str
    content: str
    ts_us: int
    confidence: float = 0.7
    entities: tuple[str, ...] = ()


class TraceCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """A long-term MemoryTrace the reflector proposes (the Reflector policy assigns the trace id)."""

    content: str
    trace_type: str  # one of TRACE_TYPES
    importance: float
    confidence: float
    source_note_ids: tuple[str, ...]
    source_seqs: tuple[int, ...] = ()
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    valence: float = 0.0
    arousal: float = 0.0
    dominance: float = 0.0


class Contradiction(msgspec.Struct, frozen=True, kw_only=True):
    """Two memories that cannot both hold, and how personality resolved them.

    Ids are note ids or, for existing traces, trace ids. `loser` is None when both are kept.
    """

    older: str
    newer: str
    reason: str
    resolution: str  # one of CONFLICT_RESOLUTIONS
    winner: str
    loser: str | None


class Reflection(msgspec.Struct, frozen=True, kw_only=True):
    """Reflector output: maps onto `Reflected` (consumed_note_ids, superseded) plus the traces to encode."""

    traces: tuple[TraceCandidate, ...]
    contradictions: tuple[Contradiction, ...]
    consumed_note_ids: tuple[str, ...]
    superseded: tuple[str, ...]  # note or trace ids that lost a contradiction


class Compaction(msgspec.Struct, frozen=True, kw_only=True):
    """A context-compaction summary: maps onto `ContextCompacted` (summary, preserved_entities, dropped)."""

    summary: str
    preserved_entities: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()  # message ids whose content the summary does not carry

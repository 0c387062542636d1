"""Events of the background processes: observations, reflections, context compaction."""

from __future__ import annotations

import msgspec

from engram.events.base import Event
from engram.events.provenance import LlmCall


class ObservationNote(msgspec.Struct, frozen=True, kw_only=True):
    note_id: str
    type: str  # factual | emotional | commitment | preference | creative | correction
    text: str
    importance: float
    observed_us: int
    entities: tuple[str, ...] = ()
    refers_to: str | None = None  # ISO date the note refers to ("next Friday" resolved)
    details: tuple[str, ...] = ()
    source_seqs: tuple[int, ...] = ()
    confidence: float = 0.7


class ObservationsRecorded(Event, tag="ObservationsRecorded"):
    """Observer output for messages `first_seq..last_seq`; buffered notes wait for activation."""

    notes: tuple[ObservationNote, ...]
    first_seq: int
    last_seq: int
    input_tokens: int
    output_tokens: int
    buffered: bool
    llm: LlmCall


class ObservationsActivated(Event, tag="ObservationsActivated"):
    """Buffered notes up to `through_seq` join the observation log (the 30K threshold was crossed)."""

    through_seq: int


class Reflected(Event, tag="Reflected"):
    """Reflector output: notes consumed, traces created, what was superseded."""

    consumed_note_ids: tuple[str, ...]
    trace_ids: tuple[str, ...]
    superseded: tuple[str, ...]
    input_tokens: int
    output_tokens: int
    llm: LlmCall


class ContextCompacted(Event, tag="ContextCompacted"):
    """One compaction: a summary node replacing messages (or lower nodes) in the context."""

    node_id: str
    strategy: str  # sliding | hierarchical | hybrid
    level: int
    first_seq: int
    last_seq: int
    summary: str
    input_tokens: int
    output_tokens: int
    children: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    preserved_entities: tuple[str, ...] = ()
    traces_created: tuple[str, ...] = ()
    duration_ms: float = 0.0
    llm: LlmCall | None = None

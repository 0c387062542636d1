"""Discussion-memory events (WilmerAI): chunk memories, the rolling summary, vector memories."""

from __future__ import annotations

from engram.events.base import Event
from engram.events.provenance import LlmCall


class MemoryFileCreated(Event, tag="MemoryFileCreated"):
    """The first memory check of a generation: from here on both chunk thresholds apply."""

    generation: int = 0


class ChunkSummarized(Event, tag="ChunkSummarized"):
    """One chronological chunk memory (a line of `<id>_memories.jsonl`)."""

    generation: int
    first_seq: int
    last_seq: int
    message_ids: tuple[str, ...]
    token_count: int
    summary: str
    llm: LlmCall


class RollingSummaryUpdated(Event, tag="RollingSummaryUpdated"):
    """The rolling summary after merging chunk memories up to `absorbed_through` (a chunk seq)."""

    generation: int
    summary: str
    absorbed_through: int
    memories_merged: int
    llm: LlmCall


class VectorMemoryStored(Event, tag="VectorMemoryStored"):
    """A structured, searchable memory (a row of `<id>_vector_memory.db`)."""

    generation: int
    memory_id: str
    title: str
    summary: str
    entities: tuple[str, ...]
    key_phrases: tuple[str, ...]
    first_seq: int
    last_seq: int
    message_ids: tuple[str, ...]
    llm: LlmCall
    sentiment: str | None = None
    topics: tuple[str, ...] = ()

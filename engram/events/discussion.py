"""Discussion-memory events (WilmerAI): the Summarizer's decisions and the LLM outputs they carry.

Every line of `<id>_memories.jsonl`, the rolling summary of `<id>_summary.jsonl` and every row of
`<id>_vector_memory.db` is folded from these events (stream = the discussion id), so deleting the
files and replaying gives them back without calling an LLM.

Memory ids are deterministic (`g<generation>-m<first_seq>-<last_seq>` for chunk memories,
`g<generation>-v<first_seq>-<last_seq>.<n>` for vector memories) and the Summarizer appends each
event with the id as its `event_id`, so a re-handled batch never appends a memory twice.
"""

from __future__ import annotations

from engram.events.base import Event
from engram.events.provenance import LlmCall

STORE_MEMORIES = "memories"  # <id>_memories.jsonl (chunk memories)
STORE_VECTOR = "vector"  # <id>_vector_memory.db (structured, searchable memories)
MODE_STANDARD = "standard"  # the store exists: both thresholds apply
MODE_CONSOLIDATION = "consolidation"  # the store does not exist yet: only the token threshold applies


class MemoryFileCreated(Event, tag="MemoryFileCreated", frozen=True):
    """The first memory check of a generation created `store`: from here on both thresholds apply.

    WilmerAI creates the memory file (empty) at the first memory check of a conversation, around
    message 3; whether the file exists decides between standard and consolidation mode. engram
    derives that from the log: the store exists once this event is recorded for the generation.
    """

    generation: int = 0
    store: str = STORE_MEMORIES
    message_count: int = 0  # messages in the discussion at the check that created it


class ChunkSummarized(Event, tag="ChunkSummarized", frozen=True):
    """One chronological chunk memory: a line of `<id>_memories.jsonl`."""

    generation: int
    first_seq: int  # seq of the first source message
    last_seq: int  # seq of the last source message
    message_ids: tuple[str, ...]  # every source message, in order
    token_count: int  # estimated tokens of the source messages
    summary: str
    llm: LlmCall
    # The Summarizer always sets these; the defaults let other producers (and tests of the LLM
    # layer) record a chunk memory with the fields above only.
    memory_id: str = ""
    first_ts_us: int = 0
    last_ts_us: int = 0
    mode: str = MODE_STANDARD  # standard | consolidation
    trigger: str = ""  # tokens | messages | both: which threshold closed the chunk
    workflow: str | None = None  # "<fileMemoryWorkflowName>@<content hash>" when a workflow wrote it
    workflow_error: str | None = None  # why the named workflow was not used (the built-in prompt was)


class SummaryUpdateRequested(Event, tag="SummaryUpdateRequested", frozen=True):
    """A workflow node (chatSummarySummarizer, FullChatSummary) asks for the rolling summary to catch up.

    The node's own parameters travel with the request, so regeneration and restarts see them.
    """

    node: str
    min_memories_per_summary: int
    loop_if_memories_exceed: int
    system_prompt: str | None = None
    prompt: str | None = None
    max_response_size_in_tokens: int | None = None
    # The node's own endpointName/preset; None: the settings' endpointName/preset.
    endpoint_name: str | None = None
    preset: str | None = None


class RollingSummaryUpdated(Event, tag="RollingSummaryUpdated", frozen=True):
    """The rolling summary after merging one batch of chunk memories (`<id>_summary.jsonl`)."""

    generation: int
    summary: str
    absorbed_through: str  # memory_id of the last chunk memory merged in so far
    absorbed_through_seq: int  # last source message seq that memory covers
    memories_merged: int  # chunk memories merged by this update
    memories_absorbed: int  # chunk memories merged into the summary so far (this generation)
    merged_memory_ids: tuple[str, ...]
    llm: LlmCall
    node: str = "chatSummarySummarizer"


class VectorMemoryStored(Event, tag="VectorMemoryStored", frozen=True):
    """A structured, searchable memory: a row of `<id>_vector_memory.db`.

    The embedding is recorded with the memory (float32, little-endian, base64) so that the
    HNSW index is rebuilt from the log byte for byte on any machine, without an embedder.
    """

    generation: int
    memory_id: str
    title: str
    summary: str
    entities: tuple[str, ...]
    key_phrases: tuple[str, ...]
    first_seq: int
    last_seq: int
    message_ids: tuple[str, ...]
    token_count: int
    first_ts_us: int
    last_ts_us: int
    mode: str
    trigger: str
    embedding: str
    embedding_model: str
    llm: LlmCall
    sentiment: str | None = None
    topics: tuple[str, ...] = ()
    workflow: str | None = None
    workflow_error: str | None = None


class VectorMemoryReembedded(Event, tag="VectorMemoryReembedded", frozen=True):
    """A vector memory's embedding by another embedder (`engram reindex`): it replaces the recorded one.

    Recorded like the first (float32, little-endian, base64, with the embedder's name), so that replay rebuilds
    the store with the new vectors and without an embedder. A memory of a superseded generation is left alone.
    """

    generation: int
    memory_id: str
    embedding: str
    embedding_model: str

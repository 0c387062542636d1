"""Workflow node types, with the JSON keys of the WilmerAI guide.

Every node has `type` and may have `id` (how later nodes refer to its output), `name` (the
guide's label) or `title` (WilmerAI's). Unknown keys are refused with the closest valid key.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from engram.config import defaults as d
from engram.config.base import ConfigModel


class Node(ConfigModel):
    kind: ClassVar[str]  # the node type as the guide writes it
    reads_only: ClassVar[bool] = True  # pure/fast reader (never waits for memory creation)

    id: str | None = None
    type: str
    name: str | None = None
    title: str | None = None

    def label(self) -> str:
        return self.id or self.name or self.title or self.kind


# --------------------------------------------------------------------- memory creators


class QualityMemory(Node):
    """Create/update memories: vector memories when `useVectorForQualityMemory`, file memories otherwise."""

    kind = "QualityMemory"
    reads_only = False


class ChatSummarySummarizer(Node):
    """Merge new chunk memories into the rolling summary (`minMemoriesPerSummary`, `loopIfMemoriesExceed`)."""

    kind = "chatSummarySummarizer"
    reads_only = False
    min_memories_per_summary: int = Field(d.MIN_MEMORIES_PER_SUMMARY, ge=1)
    loop_if_memories_exceed: int = Field(d.LOOP_IF_MEMORIES_EXCEED, ge=1)
    # Prompts with the [CHAT_SUMMARY] and [LATEST_MEMORIES] placeholders; engram's template otherwise.
    system_prompt: str | None = None
    prompt: str | None = None
    endpoint_name: str | None = None
    preset: str | None = None
    max_response_size_in_tokens: int | None = Field(None, gt=0)


# --------------------------------------------------------------------- memory readers


class RecentMemorySummarizerTool(Node):
    """The last `maxSummaryChunksFromFile` chunk memories (-1: all), joined by `customDelimiter`.

    Without a discussion id: the last `maxTurnsToPull` messages, skipping the last `lookbackStart`.
    """

    kind = "RecentMemorySummarizerTool"
    max_turns_to_pull: int = Field(0, ge=0)
    max_summary_chunks_from_file: int = Field(d.MAX_SUMMARY_CHUNKS_FROM_FILE, ge=-1)
    lookback_start: int = Field(0, ge=0)
    custom_delimiter: str = d.CHUNK_DELIMITER


class RecentMemory(RecentMemorySummarizerTool):
    """Update the file memories, then read them as RecentMemorySummarizerTool does."""

    kind = "RecentMemory"
    reads_only = False


class GetCurrentSummaryFromFile(Node):
    """The rolling summary as the file holds it (a pure read)."""

    kind = "GetCurrentSummaryFromFile"


class FullChatSummary(Node):
    """Update the file memories and the rolling summary, then read it; `isManualConfig`: a pure read."""

    kind = "FullChatSummary"
    reads_only = False
    is_manual_config: bool = False


class VectorMemorySearch(Node):
    """Search the vector memory: `input` keywords separated by `;` (OR), at most `limit` results."""

    kind = "VectorMemorySearch"
    input: str
    limit: int = Field(d.VECTOR_SEARCH_LIMIT, ge=1)
    search_mode: Literal["keyword", "semantic", "hybrid"] = "hybrid"


class MemoryRecall(Node):
    """engram's own reader: the agent's cognitive memory traces (Wunderland recall) for `input`, the best
    `limit`, one per line. Its output is what the agent remembers across discussions."""

    kind = "MemoryRecall"
    input: str
    limit: int = Field(d.VECTOR_SEARCH_LIMIT, ge=1)


# --------------------------------------------------------------------- flow


class Standard(Node):
    """Call the configured LLM endpoint with a prompt that may include earlier nodes' outputs."""

    kind = "Standard"
    system_prompt: str = ""
    prompt: str = ""
    endpoint_name: str | None = None
    preset: str | None = None
    max_response_size_in_tokens: int | None = Field(None, gt=0)
    return_to_user: bool = False


class WorkflowLock(Node):
    """Everything after this node runs in the background; the caller gets the response at once."""

    kind = "WorkflowLock"
    workflow_lock_id: str | None = None


NODE_TYPES: tuple[type[Node], ...] = (
    QualityMemory,
    ChatSummarySummarizer,
    RecentMemorySummarizerTool,
    RecentMemory,
    GetCurrentSummaryFromFile,
    FullChatSummary,
    VectorMemorySearch,
    MemoryRecall,
    Standard,
    WorkflowLock,
)
# Type names are matched without regard to case: the guide writes both `chatSummarySummarizer`
# and `ChatSummarySummarizer`.
BY_NAME: dict[str, type[Node]] = {cls.kind.lower(): cls for cls in NODE_TYPES}
# Fields holding text in which `{id}` references to earlier outputs are replaced.
TEMPLATE_FIELDS = ("prompt", "system_prompt", "input")

"""What the inspector reads, and nothing more: the narrow reading interface its views are built on.

Every view of the inspector is a plain function of a `MemoryReader`. One adapter module
(`engram.inspect.adapter`) implements it over what engram offers; the views never see how. Every
read names its agent: queries filter on `agent = ?`, files are the agent's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from engram.config.agent import AgentConfig


@dataclass(frozen=True)
class DiscussionFiles:
    """The three WilmerAI files of one discussion, as they are on disk (None: the file does not exist)."""

    memories: list[dict] | None  # <id>_memories.jsonl, one record per chunk memory, oldest first
    summary: dict | None  # <id>_summary.jsonl: the rolling summary record
    vector_memories: list[dict] | None  # <id>_vector_memory.db: the rows of its `memories` table, by ordinal
    paths: dict[str, str] = field(default_factory=dict)  # suffix -> path, for the page to name them


class RecallUnavailable(RuntimeError):
    """The reader cannot recall (e.g. it reads the files of a home with nothing running)."""


class MemoryReader(Protocol):
    def sql(self, query: str, params: Sequence[Any] = ()) -> tuple[list[str], list[tuple]]:
        """Read-only SQL over the log and the projections (`engram sql`'s views)."""
        ...

    def discussion_files(self, agent: str, discussion: str) -> DiscussionFiles: ...

    def working_memory_file(self, agent: str) -> str:
        """The agent's `working-memory.md` ("" when it has none yet)."""
        ...

    def agent_config(self, agent: str) -> AgentConfig:
        """The agent's configuration (defaults where its agent.config.json is silent)."""
        ...

    def recall(self, agent: str, query: str, *, discussion: str | None = None, limit: int | None = None,
               hyde: bool | None = None) -> dict:
        """A recall explained, as `engram recall --json` prints it plus `hyde.hits`; NOT recorded as a retrieval
        (looking at memory must not reinforce it). Raises RecallUnavailable when this reader cannot recall."""
        ...

    def context(self, agent: str, discussion: str) -> dict:
        """The context that would be sent to the model now, block by block (`engram context --json`)."""
        ...

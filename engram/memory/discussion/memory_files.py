"""Reading a discussion's memory files, and what the workflow engine's memory nodes share.

`MemoryFiles` reads one agent's files (fast reads, the query embedder); the creator nodes' side
(drain the discussion's Summarizer, restore deleted files from the log) is
`engram.api.discussion_memory.RuntimeMemory`, over any runtime.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from engram.config.home import ProjectionPaths
from engram.config.llm import EmbedderConfig
from engram.events.discussion import SummaryUpdateRequested
from engram.kernel.ids import validate_agent
from engram.memory.discussion.files import MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX, read_memories, read_summary
from engram.memory.discussion.vectors import VectorStore
from engram.providers.embeddings.base import Embedder
from engram.providers.embeddings.factory import single_threaded


class MemoryFiles:
    """Fast reads of one agent's discussion files, and the query embedder (loaded on first use)."""

    def __init__(self, paths: ProjectionPaths, agent: str, embedder_config: EmbedderConfig | None = None,
                 embedder: Embedder | None = None) -> None:
        """`embedder`: the query embedder to use (shared by the readers of a process); None: one made
        from `embedder_config` on first use."""
        self.paths = paths
        self.agent = validate_agent(agent)
        self._embedder_config = embedder_config
        self._embedder = embedder
        self._stores: dict[str, tuple[tuple[float, int], VectorStore]] = {}

    # --------------------------------------------------------------- files

    def path(self, discussion: str, suffix: str) -> Path:
        return self.paths.discussion_file(self.agent, discussion, suffix)

    def open_store(self, discussion: str) -> VectorStore | None:
        """The vector store of `discussion` (None if it does not exist), reopened only when the file changed."""
        path = self.path(discussion, VECTOR_SUFFIX)
        try:
            st = path.stat()
        except FileNotFoundError:
            self._stores.pop(discussion, None)
            return None
        key = (st.st_mtime, st.st_ino)
        cached = self._stores.get(discussion)
        if cached is None or cached[0] != key:
            cached = (key, VectorStore.open(path))
            self._stores[discussion] = cached
        return cached[1]

    def missing_files(self, discussion: str, expected: dict[str, bool]) -> list[Path]:
        """Files the projections say exist (`expected`: suffix -> exists) but that are not on disk."""
        return [self.path(discussion, s) for s, should in expected.items() if should and not self.path(discussion, s).exists()]

    def counts(self, discussion: str) -> dict[str, int]:
        store = self.open_store(discussion)
        summary = read_summary(self.path(discussion, SUMMARY_SUFFIX))
        return {
            "memories": len(read_memories(self.path(discussion, MEMORIES_SUFFIX)) or []),
            "vector_memories": len(store) if store is not None else 0,
            "absorbed": summary["memories_absorbed"] if summary else 0,
        }

    # --------------------------------------------------------------- query embeddings

    def _load_embedder(self) -> Embedder:
        if self._embedder is None:
            from engram.providers.embeddings.factory import make_embedder

            self._embedder = make_embedder(single_threaded(self._embedder_config))
        return self._embedder

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._load_embedder().embed(texts)

    @property
    def embedding_model(self) -> str:
        return self._load_embedder().name


def describe_change(before: dict[str, int], after: dict[str, int]) -> str:
    parts = [
        f"{after['memories'] - before['memories']} new chunk memor{'y' if after['memories'] - before['memories'] == 1 else 'ies'} ({after['memories']} in all)",
        f"{after['vector_memories'] - before['vector_memories']} new vector memor{'y' if after['vector_memories'] - before['vector_memories'] == 1 else 'ies'} ({after['vector_memories']} in all)",
    ]
    if after["absorbed"] != before["absorbed"]:
        parts.append(f"rolling summary now covers {after['absorbed']} chunk memories")
    return "; ".join(parts)


EXPECTED_SQL = """
SELECT
  coalesce((SELECT any_value(created) FROM discussion_memory_files WHERE discussion_id = $1), false),
  coalesce((SELECT count(*) > 0 FROM discussion_summaries WHERE discussion_id = $1), false),
  coalesce((SELECT any_value(created) FROM vector_memory_stores WHERE discussion_id = $1), false)
"""


def expected_files(row: Sequence[object]) -> dict[str, bool]:
    return dict(zip((MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX), (bool(x) for x in row)))


def summary_request(node: str, *, min_memories_per_summary: int, loop_if_memories_exceed: int,
                    system_prompt: str | None = None, prompt: str | None = None,
                    max_response_size_in_tokens: int | None = None, endpoint_name: str | None = None,
                    preset: str | None = None) -> SummaryUpdateRequested:
    return SummaryUpdateRequested(
        node=node, min_memories_per_summary=min_memories_per_summary, loop_if_memories_exceed=loop_if_memories_exceed,
        system_prompt=system_prompt, prompt=prompt, max_response_size_in_tokens=max_response_size_in_tokens,
        endpoint_name=endpoint_name, preset=preset,
    )


def request_id() -> str:
    import uuid

    return f"summary-request:{uuid.uuid4().hex}"

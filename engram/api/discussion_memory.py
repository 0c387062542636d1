"""The memory nodes of a workflow (WilmerAI) over any runtime.

Readers read the discussion's files (`MemoryFiles`); a creator node drains the discussion's Summarizer
(on the pool member that owns it) and waits for the projections; a file deleted by hand comes back from
the log (no LLM call) when a creator node runs. Deleting all three of a discussion's files is the
guide's way to regenerate: the next creator node starts a new generation from the full history, under
the settings in force now (`engram.memory.discussion.regenerate`).
"""

from __future__ import annotations

from typing import Any, Callable

from engram.api.clock import now_us
from engram.config.home import ProjectionPaths
from engram.events.envelope import NewEvent, Write
from engram.kernel.ids import validate_discussion
from engram.memory.discussion.files import MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX
from engram.memory.discussion.memory_files import (
    MemoryFiles,
    describe_change,
    expected_files,
    request_id,
    summary_request,
)
from engram.providers.embeddings.base import Embedder
from engram.runtime.base import Runtime


class RuntimeMemory(MemoryFiles):
    def __init__(self, runtime: Runtime, agent: str, embedder: Embedder | None = None,
                 recaller: Callable[[str | None, str, int], list[str]] | None = None) -> None:
        super().__init__(ProjectionPaths(runtime.home.projections_dir), agent, runtime.config.embedder, embedder)
        self.runtime = runtime
        self._recaller = recaller  # (discussion, query, limit) -> [text]: the API's recall, for MemoryRecall nodes

    def recall(self, discussion: str | None, query: str, limit: int) -> list[str]:
        if self._recaller is None:
            raise RuntimeError("this workflow run has no cognitive recall")
        return self._recaller(discussion, query, limit)

    def drain(self, discussion: str) -> str:
        """The Summarizer owning `discussion` has handled the whole log; a line about its failure, if any."""
        failed = self.runtime.drain_summarizer(self.agent, validate_discussion(discussion))
        return f"{failed}; " if failed else ""

    def ensure_memories(self, discussion: str) -> str:
        before = self.counts(discussion)
        expected = self._expected(discussion)  # asked once a turn (a query at the shard), for both checks
        regenerated = self.regenerate_if_deleted(discussion, expected)
        failed = self.drain(discussion)
        healed = self.heal(discussion, self._expected(discussion) if regenerated else expected)
        return failed + regenerated + healed + describe_change(before, self.counts(discussion))

    def request_summary(self, discussion: str, node: str, **params: Any) -> str:
        before = self.counts(discussion)
        expected = self._expected(discussion)
        regenerated = self.regenerate_if_deleted(discussion, expected)
        event = summary_request(node, **params)
        self.runtime.append([Write(validate_discussion(discussion), self.agent,
                                   (NewEvent(event, now_us(), request_id()),))])
        failed = self.drain(discussion)
        healed = self.heal(discussion, self._expected(discussion) if regenerated else expected)
        return failed + regenerated + healed + describe_change(before, self.counts(discussion))

    def _expected(self, discussion: str) -> dict[str, bool] | None:
        """Which of the discussion's files the projections say exist (suffix -> exists); None when there is nothing to
        check: no discussion yet, or every file on disk and no regeneration asked for (nothing was deleted, nothing
        is missing, whatever the log says: no query, the common case of a chat turn). Asked at the agent's shard
        (`Runtime.expected_files`)."""
        from engram.memory.discussion.regenerate import DELETED_MARKER

        marker = self.path(discussion, "").with_name(DELETED_MARKER.format(discussion=discussion))
        if all(self.path(discussion, s).exists() for s in (MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX)) \
                and not marker.exists():
            return None
        return expected_files(self.runtime.expected_files(self.agent, discussion))

    def regenerate_if_deleted(self, discussion: str, expected: dict[str, bool] | None) -> str:
        """The guide's way to regenerate: every file of the discussion deleted from Public/ (while engram ran, or
        found so at start) means a new generation from the full history, under the settings in force now."""
        from engram.memory.discussion.regenerate import DELETED_MARKER, HISTORY_TYPES, Generation, regeneration_wanted

        marker = self.path(discussion, "").with_name(DELETED_MARKER.format(discussion=discussion))
        files = {s: self.path(discussion, s) for s in (MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX)}
        if expected is None or not regeneration_wanted(files, expected, marker):
            return ""
        ts = now_us()
        self.runtime.sync_settings(self.agent, ts)  # the settings on disk now govern the new generation
        history = self.runtime.read(self.agent, stream=discussion, limit=None, types=list(HISTORY_TYPES))
        generation = Generation(self.agent, discussion, history, reason="memory files deleted", ts_us=ts)
        self.runtime.append([generation.write])
        marker.unlink(missing_ok=True)
        return (f"the memory files were deleted: generation {generation.number} regenerated from the full history "
                f"with the settings in force; ")

    def heal(self, discussion: str, expected: dict[str, bool] | None) -> str:
        """Some (not all) files deleted by hand come back from the log (no LLM call) when a creator node runs."""
        from engram.projections.discussion_rebuild import rebuild_discussion

        missing = self.missing_files(discussion, expected) if expected else []
        if not missing:
            return ""
        records = self.runtime.read(self.agent, stream=discussion, limit=None)
        rebuild_discussion(records, self.paths, self.agent, discussion, only_missing=True)
        return f"restored from the log: {', '.join(p.name for p in missing)}; "

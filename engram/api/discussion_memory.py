"""The memory nodes of a workflow (WilmerAI) over any runtime.

Readers read the discussion's files (`MemoryFiles`); a creator node drains the discussion's Summarizer
(on the pool member that owns it) and waits for the projections; a file deleted by hand comes back from
the log (no LLM call) when a creator node runs.
"""

from __future__ import annotations

import time

from engram.api.runtime import Runtime
from engram.discussion.memory_files import (
    EXPECTED_SQL, MemoryFiles, describe_change, expected_files, request_id, summary_request,
)
from engram.events.envelope import NewEvent, Write
from engram.home import ProjectionPaths
from engram.ids import validate_discussion


class RuntimeMemory(MemoryFiles):
    def __init__(self, runtime: Runtime, agent: str, embedder=None, recaller=None):
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
        failed = self.drain(discussion)
        return failed + self.heal(discussion) + describe_change(before, self.counts(discussion))

    def request_summary(self, discussion: str, node: str, **params) -> str:
        before = self.counts(discussion)
        event = summary_request(node, **params)
        self.runtime.append([Write(validate_discussion(discussion), self.agent,
                                   (NewEvent(event, int(time.time() * 1_000_000), request_id()),))])
        failed = self.drain(discussion)
        return failed + self.heal(discussion) + describe_change(before, self.counts(discussion))

    def heal(self, discussion: str) -> str:
        """Files deleted by hand come back from the log (no LLM call) when a creator node runs."""
        from engram.api.runtime import MissingTable
        from engram.discussion.rebuild import rebuild_discussion

        try:
            _, rows = self.runtime.sql(EXPECTED_SQL, [discussion])
        except MissingTable:
            rows = []
        missing = self.missing_files(discussion, expected_files(rows[0])) if rows else []
        if not missing:
            return ""
        records = self.runtime.read(self.agent, stream=discussion, limit=None)
        rebuild_discussion(records, self.paths, self.agent, discussion, only_missing=True)
        return f"restored from the log: {', '.join(p.name for p in missing)}; "

"""The lines of the per-discussion JSONL files, declared once (issue 26).

`ChunkMemory` is a line of `<id>_memories.jsonl`, `RollingSummary` the line of `<id>_summary.jsonl`. The projection
writes the file from them (`canonical`: sorted keys, no spaces; an empty `llm.error`, `workflow` or `workflow_error`
is left out, as the files always had it), and the API answers with them: a field added here is in the file, the
`engram sql` line and the API's type at once; the tables' other columns are their stored fields
(`engram.kernel.records`). Only msgspec (and the kernel's records) is imported, so that the API's types (and with them every
command) can use them without loading the configuration models.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import msgspec

from engram.kernel.records import Column


class LlmUsed(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Which provider and model wrote the line; `error`: why it fell back, when it did."""

    provider: str
    model: str
    error: str | None = None


class ChunkMemory(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A chunk memory: the summary of a run of messages, and the messages it was made from. Its stored fields are the
    columns of `discussion_memories` (engram.projections.discussion_files: behind the discussion, agent and ordinal,
    before the whole line), the others only in the line."""

    memory_id: Annotated[str, Column(required=True)]
    generation: Annotated[int, Column(sql="INTEGER", required=True)]
    summary: Annotated[str, Column(required=True)]
    first_seq: Annotated[int, Column(required=True)]
    last_seq: Annotated[int, Column(required=True)]
    first_message_id: Annotated[str, Column(stored=False)]
    last_message_id: Annotated[str, Column(stored=False)]
    message_ids: Annotated[list[str], Column(stored=False)]
    message_count: Annotated[int, Column(sql="INTEGER", required=True)]
    token_count: Annotated[int, Column(sql="INTEGER", required=True)]
    first_ts: Annotated[str, Column(stored=False)]
    last_ts: Annotated[str, Column(stored=False)]
    created_seq: Annotated[int, Column(required=True)]
    created_at: Annotated[str, Column(stored=False)]
    mode: Annotated[str, Column(stored=False)]  # standard | consolidation
    trigger: Annotated[str, Column(stored=False)]  # the threshold that closed the chunk
    llm: Annotated[LlmUsed, Column(stored=False)]
    # "<fileMemoryWorkflowName>@<content hash>" when a workflow wrote it
    workflow: Annotated[str | None, Column(stored=False)] = None
    # why the named workflow was not used (the built-in prompt was)
    workflow_error: Annotated[str | None, Column(stored=False)] = None
    # the user's labels (`MemoryEdited`); absent: none
    metadata: Annotated[dict[str, str] | None, Column(stored=False)] = None


class RollingSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The rolling summary of a discussion and the chunk memory it has absorbed up to. Its stored fields are the
    columns of `discussion_summaries` (behind the discussion and agent, before the whole line)."""

    summary: Annotated[str, Column(required=True)]
    generation: Annotated[int, Column(sql="INTEGER", required=True)]
    absorbed_through: Annotated[str, Column(required=True)]
    absorbed_through_seq: Annotated[int, Column(stored=False)]
    memories_absorbed: Annotated[int, Column(sql="INTEGER", required=True)]
    updated_seq: Annotated[int, Column(required=True)]
    updated_at: Annotated[str, Column(stored=False)]
    llm: Annotated[LlmUsed, Column(stored=False)]


def canonical(record: Any) -> str:
    """One JSON line, canonical (sorted keys, no spaces), as `projections.base.jsonl` writes it."""
    return json.dumps(msgspec.to_builtins(record), ensure_ascii=False, sort_keys=True, separators=(",", ":"))

"""The lines of the per-discussion JSONL files, declared once (issue 26).

`ChunkMemory` is a line of `<id>_memories.jsonl`, `RollingSummary` the line of `<id>_summary.jsonl`. The projection
writes the file from them (`canonical`: sorted keys, no spaces; an empty `llm.error`, `workflow` or `workflow_error`
is left out, as the files always had it), and the API answers with them: a field added here is in the file, the
`engram sql` line and the API's type at once. Only msgspec is imported, so that the API's types (and with them every
command) can use them without loading the configuration models.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec


class LlmUsed(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Which provider and model wrote the line; `error`: why it fell back, when it did."""

    provider: str
    model: str
    error: str | None = None


class ChunkMemory(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A chunk memory: the summary of a run of messages, and the messages it was made from."""

    memory_id: str
    generation: int
    summary: str
    first_seq: int
    last_seq: int
    first_message_id: str
    last_message_id: str
    message_ids: list[str]
    message_count: int
    token_count: int
    first_ts: str
    last_ts: str
    created_seq: int
    created_at: str
    mode: str  # standard | consolidation
    trigger: str  # the threshold that closed the chunk
    llm: LlmUsed
    workflow: str | None = None  # "<fileMemoryWorkflowName>@<content hash>" when a workflow wrote it
    workflow_error: str | None = None  # why the named workflow was not used (the built-in prompt was)
    metadata: dict[str, str] | None = None  # the user's labels (`MemoryEdited`); absent: none


class RollingSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The rolling summary of a discussion and the chunk memory it has absorbed up to."""

    summary: str
    generation: int
    absorbed_through: str
    absorbed_through_seq: int
    memories_absorbed: int
    updated_seq: int
    updated_at: str
    llm: LlmUsed


def canonical(record: Any) -> str:
    """One JSON line, canonical (sorted keys, no spaces), as `projections.base.jsonl` writes it."""
    return json.dumps(msgspec.to_builtins(record), ensure_ascii=False, sort_keys=True, separators=(",", ":"))

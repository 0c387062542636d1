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

from engram.kernel.describe import doc
from engram.kernel.records import Column


class LlmUsed(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Which provider and model wrote the line; `error`: why it fell back, when it did."""

    provider: Annotated[str, doc("The provider that wrote it (anthropic, offline, an endpoint's name, …).")]
    model: Annotated[str, doc("The model that wrote it.")]
    error: Annotated[str | None, doc("Why it fell back to another provider, when it did.")] = None


class ChunkMemory(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A chunk memory: the summary of a run of messages, and the messages it was made from. Its stored fields are the
    columns of `discussion_memories` (engram.projections.discussion_files: behind the discussion, agent and ordinal,
    before the whole line), the others only in the line."""

    memory_id: Annotated[str, Column(required=True), doc("The chunk memory's id.")]
    generation: Annotated[int, Column(sql="INTEGER", required=True), doc(
        "The generation it belongs to (a regenerate writes a new one that supersedes the old).")]
    summary: Annotated[str, Column(required=True), doc("The summary of the chunk's messages.")]
    first_seq: Annotated[int, Column(required=True), doc("The log position of the chunk's first message.")]
    last_seq: Annotated[int, Column(required=True), doc("The log position of its last message.")]
    first_message_id: Annotated[str, Column(stored=False), doc("The id of its first message.")]
    last_message_id: Annotated[str, Column(stored=False), doc("The id of its last message.")]
    message_ids: Annotated[list[str], Column(stored=False), doc("The ids of its messages, in order.")]
    message_count: Annotated[int, Column(sql="INTEGER", required=True), doc("How many messages it summarises.")]
    token_count: Annotated[int, Column(sql="INTEGER", required=True), doc("The estimated tokens of those messages.")]
    first_ts: Annotated[str, Column(stored=False), doc("When its first message was said (ISO 8601).")]
    last_ts: Annotated[str, Column(stored=False), doc("When its last message was said (ISO 8601).")]
    created_seq: Annotated[int, Column(required=True), doc("The log position of the event that made it.")]
    created_at: Annotated[str, Column(stored=False), doc("When it was made (event time, ISO 8601).")]
    mode: Annotated[str, Column(stored=False), doc(
        "How it was made: standard (as messages arrived) or consolidation (a regenerate).")]
    trigger: Annotated[str, Column(stored=False), doc("The threshold that closed the chunk.")]
    llm: Annotated[LlmUsed, Column(stored=False), doc("Which provider and model wrote the summary.")]
    workflow: Annotated[str | None, Column(stored=False), doc(
        "\"<fileMemoryWorkflowName>@<content hash>\" when a workflow wrote it.")] = None
    workflow_error: Annotated[str | None, Column(stored=False), doc(
        "Why the named workflow was not used (the built-in prompt was).")] = None
    metadata: Annotated[dict[str, str] | None, Column(stored=False), doc(
        "The user's labels (`MemoryEdited`); absent: none.")] = None


class RollingSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The rolling summary of a discussion and the chunk memory it has absorbed up to. Its stored fields are the
    columns of `discussion_summaries` (behind the discussion and agent, before the whole line)."""

    summary: Annotated[str, Column(required=True), doc("The summary of the discussion so far.")]
    generation: Annotated[int, Column(sql="INTEGER", required=True), doc(
        "The generation of chunk memories it was written from.")]
    absorbed_through: Annotated[str, Column(required=True), doc("The id of the last chunk memory it has absorbed.")]
    absorbed_through_seq: Annotated[int, Column(stored=False), doc("The log position of that chunk memory.")]
    memories_absorbed: Annotated[int, Column(sql="INTEGER", required=True), doc(
        "How many chunk memories it has absorbed.")]
    updated_seq: Annotated[int, Column(required=True), doc("The log position of the event that last updated it.")]
    updated_at: Annotated[str, Column(stored=False), doc("When it was last updated (event time, ISO 8601).")]
    llm: Annotated[LlmUsed, Column(stored=False), doc("Which provider and model wrote it.")]


def canonical(record: Any) -> str:
    """One JSON line, canonical (sorted keys, no spaces), as `projections.base.jsonl` writes it."""
    return json.dumps(msgspec.to_builtins(record), ensure_ascii=False, sort_keys=True, separators=(",", ":"))

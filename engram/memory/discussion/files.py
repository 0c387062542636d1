"""The three per-discussion files: their names, their line formats, and reading them.

    <projections>/agents/<agent>/Public/<id>_memories.jsonl       chunk memories, oldest first
    <projections>/agents/<agent>/Public/<id>_summary.jsonl        the rolling summary (one line)
    <projections>/agents/<agent>/Public/<id>_vector_memory.db     the searchable store (DuckDB)

The ids are validated before they touch a path (`engram.kernel.ids`). Readers here only read files:
they never wait for the Summarizer (readers never wait for writers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engram.config.home import ProjectionPaths
from engram.events.discussion import ChunkSummarized, RollingSummaryUpdated
from engram.events.envelope import Recorded, iso
from engram.events.provenance import LlmCall
from engram.kernel.ids import validate_agent, validate_discussion
from engram.memory.discussion.lines import ChunkMemory, LlmUsed, RollingSummary

MEMORIES_SUFFIX = "_memories.jsonl"
SUMMARY_SUFFIX = "_summary.jsonl"
VECTOR_SUFFIX = "_vector_memory.db"
SUFFIXES = (MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX)


class DiscussionNotFound(LookupError):
    pass


def chunk_memory_id(ev: ChunkSummarized) -> str:
    """The memory's id (derived the Summarizer's way when a producer recorded none)."""
    return ev.memory_id or f"g{ev.generation}-m{ev.first_seq}-{ev.last_seq}"


def memory_line(rec: Recorded, ev: ChunkSummarized) -> ChunkMemory:
    """A line of `<id>_memories.jsonl`: the summary and the messages it was made from."""
    return ChunkMemory(
        memory_id=chunk_memory_id(ev), generation=ev.generation, summary=ev.summary, first_seq=ev.first_seq,
        last_seq=ev.last_seq, first_message_id=ev.message_ids[0], last_message_id=ev.message_ids[-1],
        message_ids=list(ev.message_ids), message_count=len(ev.message_ids), token_count=ev.token_count,
        first_ts=iso(ev.first_ts_us), last_ts=iso(ev.last_ts_us), created_seq=rec.seq, created_at=iso(rec.ts_us),
        mode=ev.mode, trigger=ev.trigger, llm=_llm(ev.llm), workflow=ev.workflow or None,
        workflow_error=ev.workflow_error or None,
    )


def summary_line(rec: Recorded, ev: RollingSummaryUpdated) -> RollingSummary:
    """The one line of `<id>_summary.jsonl`: the summary and the memory it has absorbed up to."""
    return RollingSummary(
        summary=ev.summary, generation=ev.generation, absorbed_through=ev.absorbed_through,
        absorbed_through_seq=ev.absorbed_through_seq, memories_absorbed=ev.memories_absorbed, updated_seq=rec.seq,
        updated_at=iso(rec.ts_us), llm=_llm(ev.llm),
    )


def _llm(call: LlmCall) -> LlmUsed:
    return LlmUsed(provider=call.provider, model=call.model, error=call.error or None)


def discussion_paths(paths: ProjectionPaths, agent: str, discussion: str) -> dict[str, Path]:
    return {s: paths.discussion_file(agent, discussion, s) for s in SUFFIXES}


def locate_agent(paths: ProjectionPaths, discussion: str, agent: str | None = None) -> str:
    """The agent whose Public/ folder holds `discussion`'s files (`agent` if given)."""
    validate_discussion(discussion)
    if agent is not None:
        return validate_agent(agent)
    agents = sorted(
        {
            p.parent.parent.name
            for s in SUFFIXES
            for p in (paths.root / "agents").glob(f"*/Public/{discussion}{s}")
        }
    )
    if len(agents) == 1:
        return agents[0]
    if not agents:
        raise DiscussionNotFound(
            f"discussion {discussion!r} has no memory files under {paths.root / 'agents'} "
            "(give --agent if it belongs to an agent whose files are not written yet)"
        )
    raise DiscussionNotFound(f"discussion {discussion!r} has files under several agents ({', '.join(agents)}); give --agent")


def read_memories(path: Path) -> list[dict[str, Any]] | None:
    """The chunk memories of a memories file, oldest first; None if the file does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_summary(path: Path) -> dict[str, Any] | None:
    """The rolling summary record, or None if there is no summary file."""
    lines = read_memories(path)
    return lines[-1] if lines else None

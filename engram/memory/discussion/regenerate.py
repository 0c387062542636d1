"""Regeneration: a new generation of a discussion's memories, derived from its full history.

Two ways in, one set of events: `engram regenerate` (explicit, optionally with a settings file), and
the guide's way, deleting the discussion's three files from `Public/` and running a memory creator
node (`regeneration_wanted` says when: every file the log says exists is gone). The new generation
has no store yet, so only the token threshold cuts chunks (consolidation mode); it supersedes the old
one in the files, and the old events stay in the log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from engram.config import defaults as d
from engram.events.control import GenerationStarted, SettingsChanged
from engram.config.home import ProjectionPaths
from engram.events.discussion import RollingSummaryUpdated, SummaryUpdateRequested
from engram.events.envelope import NewEvent, Recorded, Write

# What a generation is decided from: read these types of the discussion's stream.
HISTORY_TYPES = ("MessageAppended", "GenerationStarted", "SummaryUpdateRequested", "RollingSummaryUpdated")
# Left in Public/ by a shard start that found a discussion's three files deleted (before it rendered them
# again): the next creator node regenerates. A dot file, so it is not a projection output.
DELETED_MARKER = ".{discussion}.deleted"


class NothingToRegenerate(ValueError):
    pass


class Generation:
    """The events that start a new generation of `discussion`'s memories, and what they replace."""

    def __init__(self, agent: str, discussion: str, history: Sequence[Recorded], *, reason: str, ts_us: int,
                 settings: SettingsChanged | None = None, batch: str | None = None):
        if not any(r.type == "MessageAppended" for r in history):
            raise NothingToRegenerate(f"discussion {discussion!r} has no messages to regenerate memories from")
        self.previous = max([r.event.generation for r in history if isinstance(r.event, GenerationStarted)], default=0)
        self.number = self.previous + 1
        self.had_summary = any(isinstance(r.event, RollingSummaryUpdated) and r.event.generation == self.previous
                               for r in history)
        requests = [r.event for r in history if isinstance(r.event, SummaryUpdateRequested)]
        events: list[NewEvent] = []
        if settings is not None:
            events.append(NewEvent(settings, ts_us, f"settings:regenerate:g{self.number}:{settings.content_hash}"))
        events.append(NewEvent(
            GenerationStarted(generation=self.number, reason=reason, settings=settings.settings if settings else None,
                              batch=batch),
            ts_us, f"generation:{self.number}",
        ))
        if self.had_summary:  # the rolling summary is rebuilt over the new memories
            loop = requests[-1].loop_if_memories_exceed if requests else d.LOOP_IF_MEMORIES_EXCEED
            events.append(NewEvent(
                SummaryUpdateRequested(node="regenerate", min_memories_per_summary=1, loop_if_memories_exceed=loop),
                ts_us, f"summary-request:regenerate:g{self.number}",
            ))
        self.write = Write(discussion, agent, tuple(events))


def regeneration_wanted(files: dict[str, Path], expected: dict[str, bool], marker: Path) -> bool:
    """The guide's signal: every file the log says the discussion has is gone from `Public/` (or a start found
    them gone). A `Public/` folder that is gone altogether is a projection deleted to be rebuilt: a replay."""
    if marker.exists():
        return True
    should = [files[s] for s, exists in expected.items() if exists]
    return bool(should) and should[0].parent.is_dir() and not any(p.exists() for p in should)


FILES_SQL = """
SELECT agent, discussion_id, bool_or(memories) AS memories, bool_or(summary) AS summary, bool_or(vectors) AS vectors FROM (
    SELECT agent, discussion_id, created AS memories, false AS summary, false AS vectors FROM discussion_memory_files
    UNION ALL SELECT agent, discussion_id, false, true, false FROM discussion_summaries
    UNION ALL SELECT agent, discussion_id, false, false, created FROM vector_memory_stores
) GROUP BY agent, discussion_id
"""


def mark_deleted_discussions(db_path: Path, paths: ProjectionPaths) -> list[str]:
    """Before a shard's projections render missing files again at start: leave a marker for every discussion
    whose files were all deleted while engram was down, so that the next creator node regenerates it (as the
    guide says) instead of finding the old files back. Returns the discussions marked."""
    import duckdb

    from engram.memory.discussion.files import SUFFIXES

    if not db_path.exists():
        return []  # the whole projection database is gone: that is a replay, not a regeneration
    try:
        con = duckdb.connect(str(db_path), read_only=True)
    except duckdb.Error:
        return []
    try:
        rows = con.execute(FILES_SQL).fetchall()
    except duckdb.Error:
        return []
    finally:
        con.close()
    marked = []
    for agent, discussion, *exists in rows:
        should = [paths.discussion_file(agent, discussion, s) for s, e in zip(SUFFIXES, exists) if e]
        if should and should[0].parent.is_dir() and not any(p.exists() for p in should):
            marker = paths.discussion_dir(agent) / DELETED_MARKER.format(discussion=discussion)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
            marked.append(discussion)
    return marked

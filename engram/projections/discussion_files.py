"""`<id>_memories.jsonl` and `<id>_summary.jsonl`: folded from the Summarizer's events.

Tables (for `engram sql`, across discussions):
    discussion_memories       one row per chunk memory of the current generation (and its file line)
    discussion_summaries      the current rolling summary of each discussion
    discussion_memory_files   per discussion: generation, whether the memory file exists, count

The memory file exists from the `MemoryFileCreated` of its generation on (empty until the first
chunk memory), exactly as WilmerAI creates it at the first memory check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import duckdb
import pyarrow as pa

from engram.events.discussion import ChunkSummarized, RollingSummaryUpdated, STORE_MEMORIES
from engram.events.envelope import Recorded
from engram.events.memory_edits import MemoryDeleted, MemoryEdited
from engram.kernel import records
from engram.kernel.files import atomic_write
from engram.memory.discussion.files import MEMORIES_SUFFIX, SUMMARY_SUFFIX, chunk_memory_id, memory_line, summary_line
from engram.memory.discussion.lines import ChunkMemory, RollingSummary, canonical
from engram.projections.discussion_base import (
    DiscussionMeta,
    Key,
    PerDiscussionProjection,
    delete_discussions,
    keys_table,
)


# The tables are the lines' declarations (engram.memory.discussion.lines): their stored fields behind the discussion
# and agent (and a memory's ordinal), then the whole line as the file holds it.
MEMORIES_DDL = records.ddl(
    "discussion_memories", ChunkMemory, "PRIMARY KEY (agent, discussion_id, memory_id)",
    before=[("discussion_id", "VARCHAR NOT NULL"), ("agent", "VARCHAR NOT NULL"), ("ordinal", "INTEGER NOT NULL")],
    after=[("line", "VARCHAR NOT NULL")])
SUMMARIES_DDL = records.ddl(
    "discussion_summaries", RollingSummary, "PRIMARY KEY (agent, discussion_id)",
    before=[("discussion_id", "VARCHAR NOT NULL"), ("agent", "VARCHAR NOT NULL")],
    after=[("line", "VARCHAR NOT NULL")])


class DiscussionFiles(PerDiscussionProjection):
    name = "discussion_files"
    # 2: the tables are the lines' declarations (the same columns: the record's in its order, behind the discussion,
    # agent and ordinal, then the line); 3: rows keyed by (agent, discussion_id): discussion ids are per agent
    version = 3
    store = STORE_MEMORIES
    meta_table = "discussion_memory_files"
    rows_table = "discussion_memories"
    tables: ClassVar[tuple[str, ...]] = ("discussion_memories", "discussion_summaries", "discussion_memory_files")
    interests = PerDiscussionProjection.control_types | {"ChunkSummarized", "RollingSummaryUpdated", "MemoryEdited",
                                                         "MemoryDeleted"}

    def create_tables(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(MEMORIES_DDL)
        db.execute(SUMMARIES_DDL)
        self._memories: list[tuple[str, str, int, ChunkMemory]] = []  # (discussion, agent, ordinal, memory)
        self._summaries: dict[Key, RollingSummary] = {}  # (agent, discussion) -> summary
        self._known: set[tuple[Key, str]] = set()  # (discussion, memory_id) buffered since the last flush
        self._changes: list[tuple[Key, str, MemoryEdited | None]] = []  # (discussion, memory_id, edit; None: delete)

    def extra_tables(self) -> tuple[str, ...]:
        return ("discussion_summaries",)

    def apply_memory(self, rec: Recorded, meta: DiscussionMeta) -> bool:
        ev = rec.event
        d = (rec.agent, rec.stream)
        if isinstance(ev, ChunkSummarized):
            memory_id = chunk_memory_id(ev)
            if not meta.created or (d, memory_id) in self._known:
                return False
            self._memories.append((rec.stream, meta.agent, meta.count, memory_line(rec, ev)))
            self._known.add((d, memory_id))
            meta.count += 1
            return True
        if isinstance(ev, (MemoryEdited, MemoryDeleted)):
            if ev.kind != "chunk":
                return False
            self._changes.append((d, ev.memory_id, ev if isinstance(ev, MemoryEdited) else None))
            return True
        if isinstance(ev, RollingSummaryUpdated):
            self._summaries[d] = summary_line(rec, ev)
            return True
        return False

    def on_reset(self, discussion: Key) -> None:
        self._memories = [r for r in self._memories if (r[1], r[0]) != discussion]
        self._changes = [c for c in self._changes if c[0] != discussion]
        self._summaries.pop(discussion, None)
        self._known = {k for k in self._known if k[0] != discussion}

    def insert_rows(self, db: duckdb.DuckDBPyConnection) -> None:
        if self._memories:
            discussions, agents, ordinals, memories = zip(*self._memories)
            records.insert_arrow(db, "discussion_memories", records.arrow_table(
                ChunkMemory, memories, before=[("discussion_id", pa.string(), discussions), ("agent", pa.string(), agents),
                                               ("ordinal", pa.int32(), ordinals)],
                after=[("line", pa.string(), [canonical(m) for m in memories])]))
        if self._summaries:
            summarized = sorted(self._summaries)
            delete_discussions(db, "discussion_summaries", summarized)
            summaries = [self._summaries[x] for x in summarized]
            records.insert_arrow(db, "discussion_summaries", records.arrow_table(
                RollingSummary, summaries, before=[("discussion_id", pa.string(), [d for _, d in summarized]),
                                                   ("agent", pa.string(), [a for a, _ in summarized])],
                after=[("line", pa.string(), [canonical(s) for s in summaries])]))
        for d, memory_id, edit in self._changes:  # after the inserts: an edit always follows what it edits
            if edit is None:
                db.execute("DELETE FROM discussion_memories WHERE agent = ? AND discussion_id = ? AND memory_id = ?",
                           [*d, memory_id])
                continue
            row = db.execute("SELECT summary, line FROM discussion_memories WHERE agent = ? AND discussion_id = ? "
                             "AND memory_id = ?", [*d, memory_id]).fetchone()
            if row is None:
                continue
            line = json.loads(row[1])
            if edit.content is not None:
                line["summary"] = edit.content
            if edit.metadata is not None:
                line["metadata"] = edit.metadata
                if not edit.metadata:
                    del line["metadata"]
            db.execute("UPDATE discussion_memories SET summary = ?, line = ? WHERE agent = ? AND discussion_id = ? "
                       "AND memory_id = ?", [line["summary"], canonical(line), *d, memory_id])
        self._memories, self._summaries, self._known, self._changes = [], {}, set(), []

    def _path(self, agent: str, discussion: str, suffix: str) -> Path:
        return self.ctx.paths.discussion_file(agent, discussion, suffix)

    def files_of(self, agent: str, discussion: str) -> list[Path]:
        return [self._path(agent, discussion, MEMORIES_SUFFIX), self._path(agent, discussion, SUMMARY_SUFFIX)]

    def expected_files(self, key: Key, meta: DiscussionMeta) -> list[Path]:
        discussion = key[1]
        out = [self._path(meta.agent, discussion, MEMORIES_SUFFIX)] if meta.created else []
        row = self.ctx.db.execute(
            "SELECT 1 FROM discussion_summaries WHERE agent = ? AND discussion_id = ?", [*key]
        ).fetchone()
        return out + ([self._path(meta.agent, discussion, SUMMARY_SUFFIX)] if row else [])

    def render_many(self, db: duckdb.DuckDBPyConnection, discussions: list[tuple[Key, DiscussionMeta]]) -> None:
        _engram_keys = keys_table(discussions)  # noqa: F841  (read by DuckDB, by its name)
        lines: dict[Key, list[str]] = {}
        if any(meta.created for _, meta in discussions):
            for agent, discussion, line in db.execute(
                "SELECT m.agent, m.discussion_id, m.line FROM discussion_memories m JOIN _engram_keys k "
                "ON m.agent = k.agent AND m.discussion_id = k.discussion_id ORDER BY m.agent, m.discussion_id, m.ordinal"
            ).fetchall():
                lines.setdefault((agent, discussion), []).append(line)
        summaries = {(agent, discussion): line for agent, discussion, line in db.execute(
            "SELECT s.agent, s.discussion_id, s.line FROM discussion_summaries s JOIN _engram_keys k "
            "ON s.agent = k.agent AND s.discussion_id = k.discussion_id").fetchall()}
        for key, meta in discussions:
            discussion = key[1]
            memories = self._path(meta.agent, discussion, MEMORIES_SUFFIX)
            if meta.created:
                atomic_write(memories, "".join(line + "\n" for line in lines.get(key, ())).encode())
            else:
                memories.unlink(missing_ok=True)
            summary = self._path(meta.agent, discussion, SUMMARY_SUFFIX)
            if key in summaries:
                atomic_write(summary, (summaries[key] + "\n").encode())
            else:
                summary.unlink(missing_ok=True)

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

from engram.events.discussion import ChunkSummarized, RollingSummaryUpdated, STORE_MEMORIES
from engram.events.envelope import Recorded
from engram.events.memory_edits import MemoryDeleted, MemoryEdited
from engram.kernel.files import atomic_write
from engram.memory.discussion.files import MEMORIES_SUFFIX, SUMMARY_SUFFIX, chunk_memory_id, memory_line, summary_line
from engram.memory.discussion.lines import canonical
from engram.projections.discussion_base import DiscussionMeta, Key, PerDiscussionProjection, delete_discussions


class DiscussionFiles(PerDiscussionProjection):
    name = "discussion_files"
    store = STORE_MEMORIES
    meta_table = "discussion_memory_files"
    rows_table = "discussion_memories"
    tables: ClassVar[tuple[str, ...]] = ("discussion_memories", "discussion_summaries", "discussion_memory_files")
    interests = PerDiscussionProjection.control_types | {"ChunkSummarized", "RollingSummaryUpdated", "MemoryEdited",
                                                         "MemoryDeleted"}

    def create_tables(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS discussion_memories (
                discussion_id VARCHAR NOT NULL, agent VARCHAR NOT NULL, generation INTEGER NOT NULL,
                ordinal INTEGER NOT NULL, memory_id VARCHAR NOT NULL, created_seq BIGINT NOT NULL,
                first_seq BIGINT NOT NULL, last_seq BIGINT NOT NULL, message_count INTEGER NOT NULL,
                token_count INTEGER NOT NULL, summary VARCHAR NOT NULL, line VARCHAR NOT NULL,
                PRIMARY KEY (agent, discussion_id, memory_id))"""
        )
        db.execute(
            """CREATE TABLE IF NOT EXISTS discussion_summaries (
                discussion_id VARCHAR NOT NULL, agent VARCHAR NOT NULL, generation INTEGER NOT NULL,
                updated_seq BIGINT NOT NULL, absorbed_through VARCHAR NOT NULL, memories_absorbed INTEGER NOT NULL,
                summary VARCHAR NOT NULL, line VARCHAR NOT NULL, PRIMARY KEY (agent, discussion_id))"""
        )
        self._memories: list[tuple] = []
        self._summaries: dict[Key, tuple] = {}
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
            m = memory_line(rec, ev)
            self._memories.append(
                (rec.stream, meta.agent, m.generation, meta.count, m.memory_id, m.created_seq, m.first_seq, m.last_seq,
                 m.message_count, m.token_count, m.summary, canonical(m))
            )
            self._known.add((d, memory_id))
            meta.count += 1
            return True
        if isinstance(ev, (MemoryEdited, MemoryDeleted)):
            if ev.kind != "chunk":
                return False
            self._changes.append((d, ev.memory_id, ev if isinstance(ev, MemoryEdited) else None))
            return True
        if isinstance(ev, RollingSummaryUpdated):
            s = summary_line(rec, ev)
            self._summaries[d] = (rec.stream, meta.agent, s.generation, s.updated_seq, s.absorbed_through,
                                  s.memories_absorbed, s.summary, canonical(s))
            return True
        return False

    def on_reset(self, discussion: Key) -> None:
        self._memories = [r for r in self._memories if (r[1], r[0]) != discussion]
        self._changes = [c for c in self._changes if c[0] != discussion]
        self._summaries.pop(discussion, None)
        self._known = {k for k in self._known if k[0] != discussion}

    def insert_rows(self, db: duckdb.DuckDBPyConnection) -> None:
        if self._memories:
            db.executemany("INSERT INTO discussion_memories VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self._memories)
        if self._summaries:
            delete_discussions(db, "discussion_summaries", sorted(self._summaries))
            db.executemany("INSERT INTO discussion_summaries VALUES (?, ?, ?, ?, ?, ?, ?, ?)", list(self._summaries.values()))
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

    def render(self, db: duckdb.DuckDBPyConnection, key: Key, meta: DiscussionMeta) -> None:
        discussion = key[1]
        memories = self._path(meta.agent, discussion, MEMORIES_SUFFIX)
        if meta.created:
            lines = db.execute(
                "SELECT line FROM discussion_memories WHERE agent = ? AND discussion_id = ? ORDER BY ordinal", [*key]
            ).fetchall()
            atomic_write(memories, "".join(line + "\n" for (line,) in lines).encode())
        else:
            memories.unlink(missing_ok=True)
        summary = self._path(meta.agent, discussion, SUMMARY_SUFFIX)
        row = db.execute("SELECT line FROM discussion_summaries WHERE agent = ? AND discussion_id = ?", [*key]).fetchone()
        if row:
            atomic_write(summary, (row[0] + "\n").encode())
        else:
            summary.unlink(missing_ok=True)

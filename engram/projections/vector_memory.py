"""`<id>_vector_memory.db`: the searchable store, folded from `VectorMemoryStored` events.

Table (for `engram sql`, across discussions):
    vector_memories         one row per structured memory of the current generation, with its embedding
    vector_memory_stores    per discussion: generation, whether the store exists, count

The per-discussion `.db` file (see `engram.memory.discussion.vectors`) is rendered from these rows,
HNSW index included: built single-threaded, in event order, with a fixed seed, so a replay
writes the same index bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import duckdb
import pyarrow as pa

from engram.events.discussion import STORE_VECTOR, VectorMemoryReembedded, VectorMemoryStored
from engram.events.envelope import Recorded
from engram.events.memory_edits import MemoryDeleted, MemoryEdited
from engram.kernel import records
from engram.memory.discussion.files import VECTOR_SUFFIX
from engram.memory.discussion.vectors import VectorMemoryRow, decode_vector, write_store
from engram.projections.discussion_base import DiscussionMeta, Key, PerDiscussionProjection, keys_table

# The table is `VectorMemoryRow`'s (declared once, in engram.memory.discussion.vectors) behind the discussion and agent.
_BEFORE = (("discussion_id", "VARCHAR NOT NULL"), ("agent", "VARCHAR NOT NULL"))
TABLE_DDL = records.ddl("vector_memories", VectorMemoryRow, "PRIMARY KEY (agent, discussion_id, memory_id)",
                        before=_BEFORE)


class VectorMemory(PerDiscussionProjection):
    name = "vector_memory"
    store = STORE_VECTOR
    meta_table = "vector_memory_stores"
    rows_table = "vector_memories"
    tables: ClassVar[tuple[str, ...]] = ("vector_memories", "vector_memory_stores")
    interests = PerDiscussionProjection.control_types | {"VectorMemoryStored", "VectorMemoryReembedded", "MemoryEdited",
                                                         "MemoryDeleted"}

    def create_tables(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(TABLE_DDL)
        # a table made before the user's labels were (they are the declaration's last column)
        db.execute("ALTER TABLE vector_memories ADD COLUMN IF NOT EXISTS metadata VARCHAR")
        self._rows: list[tuple[str, str, VectorMemoryRow]] = []  # (discussion, agent, row)
        # In log order: (discussion, memory id, change): an edit, a new vector of another embedder, None for a delete.
        self._changes: list[tuple[Key, str, MemoryEdited | VectorMemoryReembedded | None]] = []

    def apply_memory(self, rec: Recorded, meta: DiscussionMeta) -> bool:
        ev = rec.event
        if isinstance(ev, VectorMemoryReembedded):
            if not meta.created:
                return False
            self._changes.append(((rec.agent, rec.stream), ev.memory_id, ev))
            return True
        if isinstance(ev, (MemoryEdited, MemoryDeleted)):
            if ev.kind != "vector":
                return False
            self._changes.append(((rec.agent, rec.stream), ev.memory_id, ev if isinstance(ev, MemoryEdited) else None))
            return True
        if not isinstance(ev, VectorMemoryStored) or not meta.created:
            return False
        row = VectorMemoryRow.from_event(ev, ordinal=meta.count, created_seq=rec.seq, created_ts_us=rec.ts_us)
        self._rows.append((rec.stream, meta.agent, row))
        meta.count += 1
        return True

    def on_reset(self, discussion: Key) -> None:
        self._rows = [r for r in self._rows if (r[1], r[0]) != discussion]
        self._changes = [c for c in self._changes if c[0] != discussion]

    def insert_rows(self, db: duckdb.DuckDBPyConnection) -> None:
        if self._rows:
            table = records.arrow_table(VectorMemoryRow, [row for _, _, row in self._rows], before=[
                ("discussion_id", pa.string(), [d for d, _, _ in self._rows]),
                ("agent", pa.string(), [a for _, a, _ in self._rows])])
            records.insert_arrow(db, "vector_memories", table)
            self._rows = []
        for d, memory_id, change in self._changes:  # after the inserts: a change always follows what it changes
            key = [*d, memory_id]
            if change is None:
                db.execute("DELETE FROM vector_memories WHERE agent = ? AND discussion_id = ? AND memory_id = ?", key)
                continue
            if isinstance(change, VectorMemoryReembedded):
                db.execute("UPDATE vector_memories SET embedding = ?, embedding_model = ? "
                           "WHERE agent = ? AND discussion_id = ? AND memory_id = ?",
                           [decode_vector(change.embedding).tolist(), change.embedding_model, *key])
                continue
            if change.content is not None:  # the new text is the memory's summary
                db.execute("UPDATE vector_memories SET summary = ? "
                           "WHERE agent = ? AND discussion_id = ? AND memory_id = ?", [change.content, *key])
            # a title (the user's edit), or the title, entities and key phrases of a vector memory said again
            for column, value in (("title", change.title), ("entities", change.entities),
                                  ("key_phrases", change.key_phrases)):
                if value is not None:
                    db.execute(f"UPDATE vector_memories SET {column} = ? "
                               "WHERE agent = ? AND discussion_id = ? AND memory_id = ?",
                               [list(value) if isinstance(value, tuple) else value, *key])
            if change.embedding:  # the new form's vector, recorded with the edit (replay embeds nothing)
                db.execute("UPDATE vector_memories SET embedding = ?, embedding_model = ? "
                           "WHERE agent = ? AND discussion_id = ? AND memory_id = ?",
                           [decode_vector(change.embedding).tolist(), change.embedding_model, *key])
            if change.metadata is not None:
                db.execute("UPDATE vector_memories SET metadata = ? WHERE agent = ? AND discussion_id = ? AND memory_id = ?",
                           [json.dumps(change.metadata, sort_keys=True) if change.metadata else None, *key])
        self._changes = []

    def _path(self, agent: str, discussion: str) -> Path:
        return self.ctx.paths.discussion_file(agent, discussion, VECTOR_SUFFIX)

    def files_of(self, agent: str, discussion: str) -> list[Path]:
        return [self._path(agent, discussion)]

    def expected_files(self, key: Key, meta: DiscussionMeta) -> list[Path]:
        return [self._path(meta.agent, key[1])] if meta.created else []

    def render_many(self, db: duckdb.DuckDBPyConnection, discussions: list[tuple[Key, DiscussionMeta]]) -> None:
        rows: dict[Key, list[VectorMemoryRow]] = {}
        created = [(key, meta) for key, meta in discussions if meta.created]
        if created:
            _engram_keys = keys_table(created)  # noqa: F841  (read by DuckDB, by its name)
            cursor = db.execute(f"SELECT v.agent AS _agent, v.discussion_id AS _discussion, "
                                f"{records.select_list(VectorMemoryRow, 'v.')} FROM vector_memories v JOIN _engram_keys k "
                                "ON v.agent = k.agent AND v.discussion_id = k.discussion_id "
                                "ORDER BY v.agent, v.discussion_id, v.ordinal")
            found = cursor.fetchall()
            for key, row in zip(((r[0], r[1]) for r in found), records.from_rows(
                    VectorMemoryRow, [c[0] for c in cursor.description][2:], (r[2:] for r in found))):
                rows.setdefault(key, []).append(row)
        for key, meta in discussions:
            discussion = key[1]
            path = self._path(meta.agent, discussion)
            if not meta.created:
                path.unlink(missing_ok=True)
                continue
            mine = rows.get(key, [])
            info = {
                "discussion_id": discussion,
                "agent": meta.agent,
                "generation": str(meta.generation),
                "reflects_seq": str(meta.last_seq),
                "embedding_model": mine[0].embedding_model if mine else "",
            }
            write_store(path, mine, info)

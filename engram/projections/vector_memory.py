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
import numpy as np
import pyarrow as pa

from engram.events.discussion import STORE_VECTOR, VectorMemoryReembedded, VectorMemoryStored
from engram.events.envelope import Recorded
from engram.events.memory_edits import MemoryDeleted, MemoryEdited
from engram.memory.discussion.files import VECTOR_SUFFIX
from engram.memory.discussion.vectors import VectorMemoryRow, decode_vector, write_store
from engram.projections.discussion_base import DiscussionMeta, PerDiscussionProjection

_ROW_SCHEMA = pa.schema(
    [
        ("discussion_id", pa.string()),
        ("agent", pa.string()),
        ("generation", pa.int32()),
        ("ordinal", pa.int32()),
        ("memory_id", pa.string()),
        ("created_seq", pa.int64()),
        ("created_ts", pa.timestamp("us", tz="UTC")),
        ("title", pa.string()),
        ("summary", pa.string()),
        ("entities", pa.list_(pa.string())),
        ("key_phrases", pa.list_(pa.string())),
        ("topics", pa.list_(pa.string())),
        ("sentiment", pa.string()),
        ("first_seq", pa.int64()),
        ("last_seq", pa.int64()),
        ("message_ids", pa.list_(pa.string())),
        ("token_count", pa.int32()),
        ("first_ts", pa.timestamp("us", tz="UTC")),
        ("last_ts", pa.timestamp("us", tz="UTC")),
        ("mode", pa.string()),
        ("trigger", pa.string()),
        ("llm_provider", pa.string()),
        ("llm_model", pa.string()),
        ("workflow", pa.string()),
        ("embedding_model", pa.string()),
        ("embedding", pa.list_(pa.float32())),
    ]
)
_COLUMNS = ", ".join(f.name for f in _ROW_SCHEMA)


class VectorMemory(PerDiscussionProjection):
    name = "vector_memory"
    store = STORE_VECTOR
    meta_table = "vector_memory_stores"
    rows_table = "vector_memories"
    tables: ClassVar[tuple[str, ...]] = ("vector_memories", "vector_memory_stores")
    interests = PerDiscussionProjection.control_types | {"VectorMemoryStored", "VectorMemoryReembedded", "MemoryEdited",
                                                         "MemoryDeleted"}

    def create_tables(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS vector_memories (
                discussion_id VARCHAR NOT NULL, agent VARCHAR NOT NULL, generation INTEGER NOT NULL,
                ordinal INTEGER NOT NULL, memory_id VARCHAR NOT NULL, created_seq BIGINT NOT NULL,
                created_ts TIMESTAMPTZ, title VARCHAR, summary VARCHAR, entities VARCHAR[], key_phrases VARCHAR[],
                topics VARCHAR[], sentiment VARCHAR, first_seq BIGINT, last_seq BIGINT, message_ids VARCHAR[],
                token_count INTEGER, first_ts TIMESTAMPTZ, last_ts TIMESTAMPTZ, mode VARCHAR, trigger VARCHAR,
                llm_provider VARCHAR, llm_model VARCHAR, workflow VARCHAR, embedding_model VARCHAR,
                embedding FLOAT[], PRIMARY KEY (discussion_id, memory_id))"""
        )
        db.execute("ALTER TABLE vector_memories ADD COLUMN IF NOT EXISTS metadata VARCHAR")  # the user's labels (JSON)
        self._rows: list[dict] = []
        # In log order: (discussion, memory id, change): an edit, a new vector of another embedder, None for a delete.
        self._changes: list[tuple[str, str, MemoryEdited | VectorMemoryReembedded | None]] = []

    def apply_memory(self, rec: Recorded, meta: DiscussionMeta) -> bool:
        ev = rec.event
        if isinstance(ev, VectorMemoryReembedded):
            if not meta.created:
                return False
            self._changes.append((rec.stream, ev.memory_id, ev))
            return True
        if isinstance(ev, (MemoryEdited, MemoryDeleted)):
            if ev.kind != "vector":
                return False
            self._changes.append((rec.stream, ev.memory_id, ev if isinstance(ev, MemoryEdited) else None))
            return True
        if not isinstance(ev, VectorMemoryStored) or not meta.created:
            return False
        self._rows.append(
            {
                "discussion_id": rec.stream,
                "agent": meta.agent,
                "generation": ev.generation,
                "ordinal": meta.count,
                "memory_id": ev.memory_id,
                "created_seq": rec.seq,
                "created_ts": rec.ts_us,
                "title": ev.title,
                "summary": ev.summary,
                "entities": list(ev.entities),
                "key_phrases": list(ev.key_phrases),
                "topics": list(ev.topics),
                "sentiment": ev.sentiment,
                "first_seq": ev.first_seq,
                "last_seq": ev.last_seq,
                "message_ids": list(ev.message_ids),
                "token_count": ev.token_count,
                "first_ts": ev.first_ts_us,
                "last_ts": ev.last_ts_us,
                "mode": ev.mode,
                "trigger": ev.trigger,
                "llm_provider": ev.llm.provider,
                "llm_model": ev.llm.model,
                "workflow": ev.workflow,
                "embedding_model": ev.embedding_model,
                "embedding": decode_vector(ev.embedding).tolist(),
            }
        )
        meta.count += 1
        return True

    def on_reset(self, discussion: str) -> None:
        self._rows = [r for r in self._rows if r["discussion_id"] != discussion]
        self._changes = [c for c in self._changes if c[0] != discussion]

    def insert_rows(self, db: duckdb.DuckDBPyConnection) -> None:
        if self._rows:
            table = pa.Table.from_pylist(self._rows, schema=_ROW_SCHEMA)
            db.register("_vector_rows", table)
            db.execute(f"INSERT INTO vector_memories ({_COLUMNS}) SELECT {_COLUMNS} FROM _vector_rows")
            db.unregister("_vector_rows")
            self._rows = []
        for d, memory_id, change in self._changes:  # after the inserts: a change always follows what it changes
            key = [d, memory_id]
            if change is None:
                db.execute("DELETE FROM vector_memories WHERE discussion_id = ? AND memory_id = ?", key)
                continue
            if isinstance(change, VectorMemoryReembedded):
                db.execute("UPDATE vector_memories SET embedding = ?, embedding_model = ? "
                           "WHERE discussion_id = ? AND memory_id = ?",
                           [decode_vector(change.embedding).tolist(), change.embedding_model, *key])
                continue
            if change.content is not None:
                # The new text is the memory's summary; its vector the one recorded with the edit (replay embeds nothing).
                db.execute("UPDATE vector_memories SET summary = ?, embedding = ?, embedding_model = ? "
                           "WHERE discussion_id = ? AND memory_id = ?",
                           [change.content, decode_vector(change.embedding).tolist(), change.embedding_model, *key])
            for column, value in (("title", change.title), ("entities", change.entities),
                                  ("key_phrases", change.key_phrases)):
                if value is not None:
                    db.execute(f"UPDATE vector_memories SET {column} = ? WHERE discussion_id = ? AND memory_id = ?",
                               [list(value) if isinstance(value, tuple) else value, *key])
            if change.metadata is not None:
                db.execute("UPDATE vector_memories SET metadata = ? WHERE discussion_id = ? AND memory_id = ?",
                           [json.dumps(change.metadata, sort_keys=True) if change.metadata else None, *key])
        self._changes = []

    def _path(self, agent: str, discussion: str) -> Path:
        return self.ctx.paths.discussion_file(agent, discussion, VECTOR_SUFFIX)

    def files_of(self, agent: str, discussion: str) -> list[Path]:
        return [self._path(agent, discussion)]

    def expected_files(self, discussion: str, meta: DiscussionMeta) -> list[Path]:
        return [self._path(meta.agent, discussion)] if meta.created else []

    def render(self, db: duckdb.DuckDBPyConnection, discussion: str, meta: DiscussionMeta) -> None:
        path = self._path(meta.agent, discussion)
        if not meta.created:
            path.unlink(missing_ok=True)
            return
        rows = [
            VectorMemoryRow(
                memory_id=r[0], generation=r[1], title=r[2], summary=r[3], entities=tuple(r[4] or ()),
                key_phrases=tuple(r[5] or ()), topics=tuple(r[6] or ()), sentiment=r[7], first_seq=r[8],
                last_seq=r[9], message_ids=tuple(r[10] or ()), token_count=r[11], first_ts_us=r[12],
                last_ts_us=r[13], created_seq=r[14], created_ts_us=r[15], mode=r[16], trigger=r[17],
                llm_provider=r[18], llm_model=r[19], workflow=r[20], embedding_model=r[21],
                vector=np.asarray(r[22], dtype=np.float32),
            )
            for r in db.execute(
                """SELECT memory_id, generation, title, summary, entities, key_phrases, topics, sentiment, first_seq,
                          last_seq, message_ids, token_count, epoch_us(first_ts), epoch_us(last_ts), created_seq,
                          epoch_us(created_ts), mode, trigger, llm_provider, llm_model, workflow, embedding_model,
                          embedding
                   FROM vector_memories WHERE discussion_id = ? ORDER BY ordinal""",
                [discussion],
            ).fetchall()
        ]
        info = {
            "discussion_id": discussion,
            "agent": meta.agent,
            "generation": str(meta.generation),
            "reflects_seq": str(meta.last_seq),
            "embedding_model": rows[0].embedding_model if rows else "",
        }
        write_store(path, rows, info)

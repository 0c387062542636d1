"""`<id>_vector_memory.db`: a discussion's searchable memory store, as one DuckDB file.

Why DuckDB: it is engram's one storage engine (the log, the projections, `engram sql`), a user
can open the file with any DuckDB client, and `projections.compare` checks replays of `.db`
files row for row. The file is written whole, into a temporary file that then replaces the old
one, so a reader never sees half a store and never waits for (or locks out) the writer.

Tables:
    memories     one row per structured memory (title, summary, entities, key phrases, topics,
                 sentiment, the source message range and ids, provenance), in creation order
    embeddings   memory_id -> the embedding vector (float32) and the model that made it
    hnsw_index   the HNSW graph over those vectors (engram.providers.search.hnsw, hnswlib), as the bytes
                 hnswlib writes, with the ids in label order; built single-threaded, in event
                 order, with a fixed seed, so replay gives the same bytes
    store_info   key/value facts: discussion, agent, generation, the seq the file reflects ...

The keyword index (BM25, engram.providers.search.bm25) is built from the memory rows when a store is
opened: it is a deterministic function of them, costs well under a millisecond per hundred
memories, and so is not stored twice.
"""

from __future__ import annotations

import base64
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import duckdb
import numpy as np
import pyarrow as pa

from engram.events.envelope import iso
from engram.providers.search.bm25 import BM25
from engram.providers.search.hnsw import HNSW_EF_CONSTRUCTION, HNSW_M, HNSW_SEED, HnswIndex

STORE_FORMAT = "engram-vector-memory/1"
# A store holds one discussion: small DuckDB blocks keep a small store a small file (~100 KB
# instead of ~2 MB with the default 256 KB blocks). Readers need no option to open it.
STORE_BLOCK_SIZE = 16_384


def encode_vector(vector: np.ndarray) -> str:
    """An embedding as text for an event: float32 little-endian, base64."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f4").astype(np.float32)


@dataclass
class VectorMemoryRow:
    """One memory of the store (what `VectorMemoryStored` recorded, plus where it sits)."""

    memory_id: str
    generation: int
    title: str
    summary: str
    entities: tuple[str, ...]
    key_phrases: tuple[str, ...]
    topics: tuple[str, ...]
    sentiment: str | None
    first_seq: int
    last_seq: int
    message_ids: tuple[str, ...]
    token_count: int
    first_ts_us: int
    last_ts_us: int
    created_seq: int
    created_ts_us: int
    mode: str
    trigger: str
    llm_provider: str
    llm_model: str
    workflow: str | None
    embedding_model: str
    vector: np.ndarray = field(repr=False)

    def keyword_text(self) -> str:
        """What the keyword index sees: the curated fields WilmerAI's FTS table indexes."""
        return "\n".join(
            [self.title, self.summary, " ; ".join(self.entities), " ; ".join(self.key_phrases), " ; ".join(self.topics)]
        )

    def as_dict(self) -> dict:
        return {
            "memory_id": self.memory_id,
            "title": self.title,
            "summary": self.summary,
            "entities": list(self.entities),
            "key_phrases": list(self.key_phrases),
            "topics": list(self.topics),
            "sentiment": self.sentiment,
            "first_seq": self.first_seq,
            "last_seq": self.last_seq,
            "first_message_id": self.message_ids[0] if self.message_ids else None,
            "last_message_id": self.message_ids[-1] if self.message_ids else None,
            "message_ids": list(self.message_ids),
            "first_ts": iso(self.first_ts_us),
            "last_ts": iso(self.last_ts_us),
            "generation": self.generation,
        }


_MEMORY_SCHEMA = pa.schema(
    [
        ("memory_id", pa.string()),
        ("ordinal", pa.int32()),
        ("generation", pa.int32()),
        ("title", pa.string()),
        ("summary", pa.string()),
        ("entities", pa.list_(pa.string())),
        ("key_phrases", pa.list_(pa.string())),
        ("topics", pa.list_(pa.string())),
        ("sentiment", pa.string()),
        ("first_seq", pa.int64()),
        ("last_seq", pa.int64()),
        ("first_message_id", pa.string()),
        ("last_message_id", pa.string()),
        ("message_ids", pa.list_(pa.string())),
        ("message_count", pa.int32()),
        ("token_count", pa.int32()),
        ("first_ts", pa.timestamp("us", tz="UTC")),
        ("last_ts", pa.timestamp("us", tz="UTC")),
        ("created_seq", pa.int64()),
        ("created_ts", pa.timestamp("us", tz="UTC")),
        ("mode", pa.string()),
        ("trigger", pa.string()),
        ("llm_provider", pa.string()),
        ("llm_model", pa.string()),
        ("workflow", pa.string()),
    ]
)

_DDL = [
    """CREATE TABLE memories (
        memory_id VARCHAR PRIMARY KEY, ordinal INTEGER NOT NULL, generation INTEGER NOT NULL,
        title VARCHAR, summary VARCHAR, entities VARCHAR[], key_phrases VARCHAR[], topics VARCHAR[],
        sentiment VARCHAR, first_seq BIGINT, last_seq BIGINT, first_message_id VARCHAR, last_message_id VARCHAR,
        message_ids VARCHAR[], message_count INTEGER, token_count INTEGER, first_ts TIMESTAMPTZ, last_ts TIMESTAMPTZ,
        created_seq BIGINT, created_ts TIMESTAMPTZ, mode VARCHAR, trigger VARCHAR, llm_provider VARCHAR,
        llm_model VARCHAR, workflow VARCHAR)""",
    "CREATE TABLE embeddings (memory_id VARCHAR PRIMARY KEY, model VARCHAR NOT NULL, dim INTEGER NOT NULL, vector FLOAT[] NOT NULL)",
    """CREATE TABLE hnsw_index (model VARCHAR, dim INTEGER, m INTEGER, ef_construction INTEGER, seed INTEGER,
        ids VARCHAR[], index_bytes BLOB)""",
    "CREATE TABLE store_info (key VARCHAR PRIMARY KEY, value VARCHAR)",
]


def build_hnsw(rows: Sequence[VectorMemoryRow]) -> tuple[HnswIndex | None, bytes]:
    """The HNSW index over `rows` in order, and its file bytes (b"" without rows).

    Items are added one at a time, single-threaded, into an index sized exactly for them:
    the bytes then depend only on the vectors and their order.
    """
    if not rows:
        return None, b""
    dim = int(rows[0].vector.shape[0])
    index = HnswIndex(dim, capacity=len(rows))
    for row in rows:
        index.add([row.memory_id], row.vector.reshape(1, dim))
    with tempfile.TemporaryDirectory(prefix="engram-hnsw-") as tmp:
        path = Path(tmp) / "index.bin"
        index.save(path)
        return index, path.read_bytes()


# Writing a store: one in-memory DuckDB connection per process, which attaches each new file in turn (a connection
# of its own cost each file ~0.1 s to create, more than the whole write), and a schema-initialised empty store
# made once per process (`_empty_store`), which each new file starts as (creating its four tables, each
# statement committed to the file, cost more than filling them). Measured per file: tests/memory/discussion/test_vector_store_files.py.
_writer_lock = threading.Lock()
_writer: duckdb.DuckDBPyConnection | None = None
_empty: bytes | None = None


def _writer_connection() -> duckdb.DuckDBPyConnection:
    global _writer
    if _writer is None:
        _writer = duckdb.connect()
    return _writer


def _empty_store() -> bytes:
    """The bytes of a store with its tables and no rows, written by this DuckDB (so a copy opens as one it wrote)."""
    global _empty
    if _empty is None:
        con = _writer_connection()
        with tempfile.TemporaryDirectory(prefix="engram-store-") as folder:
            path = Path(folder) / "empty.db"
            con.execute(f"ATTACH {_literal(path)} AS empty_store (BLOCK_SIZE {STORE_BLOCK_SIZE})")
            try:
                for ddl in _DDL:
                    con.execute(ddl.replace("CREATE TABLE ", "CREATE TABLE empty_store.", 1))
            finally:
                con.execute("DETACH empty_store")
            _empty = path.read_bytes()
    return _empty


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def write_store(path: Path, rows: Sequence[VectorMemoryRow], info: dict[str, str]) -> None:
    """Write the whole store for one discussion to `path`, atomically: a copy of the empty store, filled in one
    transaction, then checkpointed into the file as it is detached."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    wal = tmp.with_name(tmp.name + ".wal")
    for stale in (tmp, wal):
        if stale.exists():
            stale.unlink()
    _, index_bytes = build_hnsw(rows)
    full_info = {"format": STORE_FORMAT, "memory_count": str(len(rows)), **info}
    with _writer_lock:
        con = _writer_connection()
        tmp.write_bytes(_empty_store())
        con.execute(f"ATTACH {_literal(tmp)} AS store")
        try:
            con.execute("BEGIN TRANSACTION")
            if rows:
                table = pa.Table.from_pylist([_memory_record(i, r) for i, r in enumerate(rows)], schema=_MEMORY_SCHEMA)
                con.register("_memories", table)
                try:
                    con.execute("INSERT INTO store.memories SELECT * FROM _memories")
                finally:
                    con.unregister("_memories")
                dim = int(rows[0].vector.shape[0])
                emb = pa.table(
                    {
                        "memory_id": [r.memory_id for r in rows],
                        "model": [r.embedding_model for r in rows],
                        "dim": pa.array([int(r.vector.shape[0]) for r in rows], type=pa.int32()),
                        "vector": pa.array([r.vector.tolist() for r in rows], type=pa.list_(pa.float32())),
                    }
                )
                con.register("_emb", emb)
                try:
                    con.execute("INSERT INTO store.embeddings SELECT * FROM _emb")
                finally:
                    con.unregister("_emb")
                con.execute(
                    "INSERT INTO store.hnsw_index VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [rows[0].embedding_model, dim, HNSW_M, HNSW_EF_CONSTRUCTION, HNSW_SEED,
                     [r.memory_id for r in rows], index_bytes],
                )
            facts = sorted(full_info.items())
            con.execute("INSERT INTO store.store_info VALUES " + ", ".join(["(?, ?)"] * len(facts)),
                        [x for fact in facts for x in fact])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        finally:
            con.execute("DETACH store")  # checkpoints the file: no WAL is left beside it
    if wal.exists():  # never seen; a store must be one file, so fold the WAL in rather than leave it behind
        check = duckdb.connect(str(tmp))
        try:
            check.execute("CHECKPOINT")
        finally:
            check.close()
    os.replace(tmp, path)


def _memory_record(ordinal: int, r: VectorMemoryRow) -> dict:
    return {
        "memory_id": r.memory_id,
        "ordinal": ordinal,
        "generation": r.generation,
        "title": r.title,
        "summary": r.summary,
        "entities": list(r.entities),
        "key_phrases": list(r.key_phrases),
        "topics": list(r.topics),
        "sentiment": r.sentiment,
        "first_seq": r.first_seq,
        "last_seq": r.last_seq,
        "first_message_id": r.message_ids[0] if r.message_ids else None,
        "last_message_id": r.message_ids[-1] if r.message_ids else None,
        "message_ids": list(r.message_ids),
        "message_count": len(r.message_ids),
        "token_count": r.token_count,
        "first_ts": r.first_ts_us,
        "last_ts": r.last_ts_us,
        "created_seq": r.created_seq,
        "created_ts": r.created_ts_us,
        "mode": r.mode,
        "trigger": r.trigger,
        "llm_provider": r.llm_provider,
        "llm_model": r.llm_model,
        "workflow": r.workflow,
    }


class VectorStore:
    """A store opened for searching: its rows, the keyword index and the HNSW index in memory."""

    def __init__(self, rows: list[VectorMemoryRow], info: dict[str, str], hnsw: HnswIndex | None):
        self.rows = rows
        self.info = info
        self.by_id = {r.memory_id: r for r in rows}
        self.hnsw = hnsw
        self.keywords = BM25()
        for r in rows:
            self.keywords.add(r.memory_id, r.keyword_text())

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def embedding_model(self) -> str | None:
        return self.info.get("embedding_model") or (self.rows[0].embedding_model if self.rows else None)

    @classmethod
    def open(cls, path: Path) -> "VectorStore":
        con = duckdb.connect(str(path), read_only=True)
        try:
            info = dict(con.execute("SELECT key, value FROM store_info").fetchall())
            mem = con.execute(
                """SELECT m.memory_id, m.generation, m.title, m.summary, m.entities, m.key_phrases, m.topics,
                          m.sentiment, m.first_seq, m.last_seq, m.message_ids, m.token_count,
                          epoch_us(m.first_ts), epoch_us(m.last_ts), m.created_seq, epoch_us(m.created_ts), m.mode,
                          m.trigger, m.llm_provider, m.llm_model, m.workflow, e.model, e.vector
                   FROM memories m JOIN embeddings e USING (memory_id) ORDER BY m.ordinal"""
            ).fetchall()
            index_row = con.execute("SELECT dim, ids, index_bytes FROM hnsw_index").fetchone()
        finally:
            con.close()
        rows = [
            VectorMemoryRow(
                memory_id=m[0], generation=m[1], title=m[2], summary=m[3], entities=tuple(m[4] or ()),
                key_phrases=tuple(m[5] or ()), topics=tuple(m[6] or ()), sentiment=m[7], first_seq=m[8],
                last_seq=m[9], message_ids=tuple(m[10] or ()), token_count=m[11], first_ts_us=m[12],
                last_ts_us=m[13], created_seq=m[14], created_ts_us=m[15], mode=m[16], trigger=m[17],
                llm_provider=m[18], llm_model=m[19], workflow=m[20], embedding_model=m[21],
                vector=np.asarray(m[22], dtype=np.float32),
            )
            for m in mem
        ]
        hnsw = None
        if index_row is not None and index_row[2]:
            dim, ids, blob = index_row
            with tempfile.TemporaryDirectory(prefix="engram-hnsw-") as tmp:
                p = Path(tmp) / "index.bin"
                p.write_bytes(blob)
                hnsw = HnswIndex.load(p, dim, list(ids))
        return cls(rows, info, hnsw)

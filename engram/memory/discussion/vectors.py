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
from typing import Annotated, Any, Sequence

import duckdb
import numpy as np
import pyarrow as pa

from engram.events.discussion import VectorMemoryStored
from engram.events.envelope import iso
from engram.events.store import DUCKDB_THREADS
from engram.kernel import records
from engram.kernel.records import Column
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


@dataclass(kw_only=True)
class VectorMemoryRow:
    """One memory of the store: what `VectorMemoryStored` recorded, plus where it sits. Declared once: the
    projection's `vector_memories` table (`engram sql`) is this record's table (`engram.kernel.records`, behind its
    discussion and agent), the store file's `memories` and `embeddings` rows are written from it and read back
    into it by column name, and `from_event` is the one place an event becomes a row."""

    generation: Annotated[int, Column(sql="INTEGER", required=True)]
    ordinal: Annotated[int, Column(sql="INTEGER", required=True)] = 0  # its place among its discussion's memories
    memory_id: Annotated[str, Column(required=True)]
    created_seq: Annotated[int, Column(required=True)]
    created_ts_us: Annotated[int, Column("created_ts", timestamp=True)]
    title: str
    summary: str
    entities: tuple[str, ...]
    key_phrases: tuple[str, ...]
    topics: tuple[str, ...]
    sentiment: str | None
    first_seq: int
    last_seq: int
    message_ids: tuple[str, ...]
    token_count: Annotated[int, Column(sql="INTEGER")]
    first_ts_us: Annotated[int, Column("first_ts", timestamp=True)]
    last_ts_us: Annotated[int, Column("last_ts", timestamp=True)]
    mode: str
    trigger: str
    llm_provider: str
    llm_model: str
    workflow: str | None
    embedding_model: str
    vector: Annotated[np.ndarray, Column("embedding", sql="FLOAT[]")] = field(repr=False)
    # the user's labels (`PATCH …/memories/vector/{id}`), a JSON object; in the projection's table only
    metadata: Annotated[tuple[tuple[str, str], ...], Column(json=True)] = ()

    @classmethod
    def from_event(cls, ev: VectorMemoryStored, *, ordinal: int, created_seq: int, created_ts_us: int) -> "VectorMemoryRow":
        """The row a `VectorMemoryStored` event (recorded at `created_seq`, `created_ts_us`) folds into."""
        return cls(
            generation=ev.generation, ordinal=ordinal, memory_id=ev.memory_id, created_seq=created_seq,
            created_ts_us=created_ts_us, title=ev.title, summary=ev.summary, entities=ev.entities,
            key_phrases=ev.key_phrases, topics=ev.topics, sentiment=ev.sentiment, first_seq=ev.first_seq,
            last_seq=ev.last_seq, message_ids=ev.message_ids, token_count=ev.token_count, first_ts_us=ev.first_ts_us,
            last_ts_us=ev.last_ts_us, mode=ev.mode, trigger=ev.trigger, llm_provider=ev.llm.provider,
            llm_model=ev.llm.model, workflow=ev.workflow, embedding_model=ev.embedding_model,
            vector=decode_vector(ev.embedding),
        )

    def keyword_text(self) -> str:
        """What the keyword index sees: the curated fields WilmerAI's FTS table indexes."""
        return "\n".join(
            [self.title, self.summary, " ; ".join(self.entities), " ; ".join(self.key_phrases), " ; ".join(self.topics)]
        )

    def as_dict(self) -> dict[str, Any]:
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


# The file's `memories` table: the record's columns in the format's order (typed by its declaration), and what the
# file adds from the message ids.
_MEMORY_LAYOUT = records.laid_out(
    VectorMemoryRow,
    ("memory_id", "ordinal", "generation", "title", "summary", "entities", "key_phrases", "topics", "sentiment",
     "first_seq", "last_seq", "first_message_id", "last_message_id", "message_ids", "message_count", "token_count",
     "first_ts", "last_ts", "created_seq", "created_ts", "mode", "trigger", "llm_provider", "llm_model", "workflow"),
    {"first_message_id": "VARCHAR", "last_message_id": "VARCHAR", "message_count": "INTEGER"},
)
_MEMORY_SCHEMA = records.layout_schema(_MEMORY_LAYOUT)

_DDL = [
    records.layout_ddl("memories", _MEMORY_LAYOUT, "PRIMARY KEY (memory_id)"),
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
        _writer = duckdb.connect(config={"threads": DUCKDB_THREADS})  # one worker, as the log's (EventStore)
    return _writer


_reader_lock = threading.Lock()
_reader: duckdb.DuckDBPyConnection | None = None


def _reader_connection() -> duckdb.DuckDBPyConnection:
    """The instance stores are attached to (read-only, one at a time) to be read (`VectorStore.open`)."""
    global _reader
    if _reader is None:
        _reader = duckdb.connect(config={"threads": DUCKDB_THREADS})
    return _reader


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


def _memory_record(ordinal: int, r: VectorMemoryRow) -> dict[str, Any]:
    """A row of the file's `memories` table: the record's columns by name, and what the file adds (the first and
    last message ids, their count) in the file's own order (`_MEMORY_SCHEMA`, the format's)."""
    stored = records.stored_values(VectorMemoryRow, r)
    added = {
        "ordinal": ordinal,
        "first_message_id": r.message_ids[0] if r.message_ids else None,
        "last_message_id": r.message_ids[-1] if r.message_ids else None,
        "message_count": len(r.message_ids),
    }
    return {name: added[name] if name in added else stored[name] for name in _MEMORY_SCHEMA.names}


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
        # Attached read-only to one instance kept for reading stores: a new DuckDB instance per open cost ~17 ms of
        # CPU here (of ~25), and a chat turn's reader opens its discussion's store again after each memory creation.
        with _reader_lock:
            con = _reader_connection()
            con.execute(f"ATTACH {_literal(path)} AS vstore (READ_ONLY)")
            try:
                info = dict(con.execute("SELECT key, value FROM vstore.store_info").fetchall())
                # the row's columns by name: the file's `memories` row and its embedding (`embeddings.model`, `.vector`)
                cursor = con.execute(
                    f"""SELECT {records.select_list(VectorMemoryRow)} FROM (
                            SELECT m.*, e.model AS embedding_model, e.vector AS embedding, NULL AS metadata
                            FROM vstore.memories m JOIN vstore.embeddings e USING (memory_id)) ORDER BY ordinal"""
                )
                names = [c[0] for c in cursor.description]
                rows = records.from_rows(VectorMemoryRow, names, cursor.fetchall())
                index_row = con.execute("SELECT dim, ids, index_bytes FROM vstore.hnsw_index").fetchone()
            finally:
                con.execute("DETACH vstore")
        hnsw = None
        if index_row is not None and index_row[2]:
            dim, ids, blob = index_row
            with tempfile.TemporaryDirectory(prefix="engram-hnsw-") as tmp:
                p = Path(tmp) / "index.bin"
                p.write_bytes(blob)
                hnsw = HnswIndex.load(p, dim, list(ids))
        return cls(rows, info, hnsw)

"""A content-addressed store of embeddings: (model, sha256(text)) -> vector, in its own DuckDB file.

Embeddings are deterministic per model, so a vector computed once is valid forever: replay and
re-indexing look texts up here instead of running the model. One process writes a DuckDB file;
this class owns its connection. Lookups and inserts go as Arrow batches, never row by row.

Two things keep small calls (one query, one memory) cheap. The keys of a model are read once into
a set, so a text never seen costs no DuckDB lookup (this process is the file's only writer, so the
set stays true). With `write_behind`, new vectors are kept in memory and written in one insert once
that many wait (and at `flush`/`close`): a process that dies first only loses cache entries, which
are recomputed, identical, when next asked for.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Sequence

import duckdb
import numpy as np
import pyarrow as pa

CACHE_RELATIVE_PATH = Path("cache") / "embeddings.duckdb"
# Vectors kept in memory after they were written or read (about 1.5 KB each at 384 dims): a text is
# usually asked for again soon after it was first embedded (the trace index of the shard and of the
# reader, the consolidator, after auto-ingest), and a hit here costs no DuckDB query.
RECENT_VECTORS = 8_192

SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model   VARCHAR NOT NULL,
    key     VARCHAR NOT NULL,   -- sha256 of the text, hex
    dim     INTEGER NOT NULL,
    vector  FLOAT[] NOT NULL,
    PRIMARY KEY (model, key)
);
"""


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    def __init__(self, path: str | Path, *, write_behind: int = 0):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._con = duckdb.connect(self.path)
        self._con.execute(SCHEMA)
        self._lock = threading.RLock()  # a DuckDB connection serves one thread at a time
        self.write_behind = write_behind  # 0: every put is written at once
        self._known: dict[str, set[str]] = {}  # model -> keys in the file or waiting to be written
        self._unwritten: dict[str, dict[str, np.ndarray]] = {}  # model -> key -> vector
        self._recent: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()  # (model, key) -> vector, LRU

    def _known_keys(self, model: str) -> set[str]:
        known = self._known.get(model)
        if known is None:
            rows = self._con.execute("SELECT key FROM embeddings WHERE model = ?", [model]).fetchall()
            known = self._known[model] = {key for (key,) in rows}
        return known

    def get_many(self, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors of `keys` (those present) for `model`."""
        if not keys:
            return {}
        with self._lock:
            waiting = self._unwritten.get(model, {})
            out = {key: waiting[key] for key in keys if key in waiting}
            for key in keys:
                if key not in out and (model, key) in self._recent:
                    self._recent.move_to_end((model, key))
                    out[key] = self._recent[(model, key)]
            known = self._known_keys(model)
            stored = [key for key in dict.fromkeys(keys) if key in known and key not in out]
        if stored:
            found = self._read(model, stored)
            self._remember(model, found.items())
            out.update(found)
        return out

    def _remember(self, model: str, items) -> None:
        with self._lock:
            for key, vector in items:
                self._recent[(model, key)] = vector
                self._recent.move_to_end((model, key))
            while len(self._recent) > RECENT_VECTORS:
                self._recent.popitem(last=False)

    def _read(self, model: str, keys: list[str]) -> dict[str, np.ndarray]:
        wanted = pa.table({"key": pa.array(list(keys), pa.string())})
        with self._lock:
            self._con.register("wanted_keys", wanted)
            try:
                found = self._con.sql(
                    "SELECT e.key, e.dim, e.vector FROM embeddings e "
                    "JOIN (SELECT DISTINCT key FROM wanted_keys) w ON e.key = w.key WHERE e.model = ?",
                    params=[model],
                ).to_arrow_table()
            finally:
                self._con.unregister("wanted_keys")
        if found.num_rows == 0:
            return {}
        dims = found.column("dim").to_pylist()
        flat = found.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.float32)
        out: dict[str, np.ndarray] = {}
        offset = 0
        for key, dim in zip(found.column("key").to_pylist(), dims):
            out[key] = flat[offset : offset + dim]
            offset += dim
        return out

    def put_many(self, model: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Store `vectors` (n, dim) under `keys`; keys already present are left as they are."""
        if len(keys) == 0:
            return
        with self._lock:
            known = self._known_keys(model)
            fresh = [(key, vector) for key, vector in zip(keys, vectors) if key not in known]
            known.update(key for key, _ in fresh)
            waiting = self._unwritten.setdefault(model, {})
            waiting.update(fresh)
            if self.waiting >= self.write_behind:
                self.flush()

    def flush(self) -> None:
        """Write every vector still waiting, one insert per model."""
        with self._lock:
            unwritten, self._unwritten = self._unwritten, {}
            for model, waiting in unwritten.items():
                if waiting:
                    self._write(model, list(waiting), np.stack(list(waiting.values())))
                    self._remember(model, waiting.items())

    def _write(self, model: str, keys: list[str], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n, dim = vectors.shape
        rows = pa.table(
            {
                "model": pa.array([model] * n, pa.string()),
                "key": pa.array(list(keys), pa.string()),
                "dim": pa.array([dim] * n, pa.int32()),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim),
            }
        )
        with self._lock:
            self._con.register("new_rows", rows)
            try:
                self._con.execute(
                    "INSERT INTO embeddings SELECT model, key, dim, vector::FLOAT[] FROM new_rows "
                    "ON CONFLICT DO NOTHING"
                )
            finally:
                self._con.unregister("new_rows")

    @property
    def waiting(self) -> int:
        """Vectors kept in memory, not written yet (see `write_behind`)."""
        with self._lock:
            return sum(len(w) for w in self._unwritten.values())

    def count(self, model: str | None = None) -> int:
        """Entries in the cache: written, and waiting to be written."""
        with self._lock:
            if model is None:
                stored = self._con.execute("SELECT count(*) FROM embeddings").fetchall()[0][0]
                return stored + self.waiting
            stored = self._con.execute("SELECT count(*) FROM embeddings WHERE model = ?", [model]).fetchall()[0][0]
            return stored + len(self._unwritten.get(model, {}))

    def retain(self, model: str, keys: set[str]) -> int:
        """Keep only `model`'s vectors of `keys` (e.g. what a replay after a forget used); everything else is
        deleted and the file rewritten, so no vector of a forgotten text stays in it. Returns entries removed."""
        from engram.kernel.files import compact_database

        with self._lock:
            self.flush()
            before = self._con.execute("SELECT count(*) FROM embeddings").fetchall()[0][0]
            self._con.register("kept_keys", pa.table({"key": pa.array(sorted(keys), pa.string())}))
            try:
                self._con.execute(
                    "DELETE FROM embeddings WHERE model <> ? OR key NOT IN (SELECT key FROM kept_keys)", [model]
                )
            finally:
                self._con.unregister("kept_keys")
            removed = before - self._con.execute("SELECT count(*) FROM embeddings").fetchall()[0][0]
            self._known.clear()
            if removed and self.path != ":memory:":
                self._con.close()
                compact_database(self.path)
                self._con = duckdb.connect(self.path)
            return removed

    def close(self) -> None:
        with self._lock:
            self.flush()
            self._con.close()

"""A content-addressed store of embeddings: (model, sha256(text)) -> vector, in its own DuckDB file.

Embeddings are deterministic per model, so a vector computed once is valid forever: replay and
re-indexing look texts up here instead of running the model. One process writes a DuckDB file;
this class owns its connection. Lookups and inserts go as Arrow batches, never row by row.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Sequence

import duckdb
import numpy as np
import pyarrow as pa

CACHE_RELATIVE_PATH = Path("cache") / "embeddings.duckdb"

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
    def __init__(self, path: str | Path):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._con = duckdb.connect(self.path)
        self._con.execute(SCHEMA)
        self._lock = threading.Lock()  # a DuckDB connection serves one thread at a time

    def get_many(self, model: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors of `keys` (those present) for `model`."""
        if not keys:
            return {}
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

    def count(self, model: str | None = None) -> int:
        with self._lock:
            if model is None:
                return self._con.execute("SELECT count(*) FROM embeddings").fetchone()[0]
            return self._con.execute("SELECT count(*) FROM embeddings WHERE model = ?", [model]).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._con.close()

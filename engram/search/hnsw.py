"""A deterministic HNSW index (hnswlib) keyed by string ids.

Replay must give the same bytes back, and hnswlib writes identical index files only when
items are added single-threaded, in the same order, with the same random seed. So: one
thread per index (parallelise across indexes, not inside one), a fixed seed, and items in
the order their events were recorded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import hnswlib
import numpy as np

# hnswlib construction parameters: M links per node, ef_construction candidate list while
# building; ef_search is raised to at least k at query time.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 64
HNSW_SEED = 100
INITIAL_CAPACITY = 1_024


class HnswIndex:
    """Cosine-similarity HNSW over L2-normalised vectors, with string ids and soft deletion."""

    def __init__(self, dim: int, *, capacity: int = INITIAL_CAPACITY, ef_search: int = HNSW_EF_SEARCH):
        self.dim = dim
        self.ef_search = ef_search
        self._index = hnswlib.Index(space="cosine", dim=dim)
        self._index.init_index(
            max_elements=capacity, M=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION, random_seed=HNSW_SEED,
            allow_replace_deleted=False,
        )
        self._index.set_num_threads(1)
        self.ids: list[str] = []  # label -> id
        self._labels: dict[str, int] = {}
        self._deleted: set[int] = set()

    def __len__(self) -> int:
        return len(self.ids) - len(self._deleted)

    def __contains__(self, key: str) -> bool:
        label = self._labels.get(key)
        return label is not None and label not in self._deleted

    def add(self, keys: list[str], vectors: np.ndarray) -> None:
        """Add items in order (single-threaded, so the index bytes depend only on the order)."""
        if not keys:
            return
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(keys), self.dim)
        fresh = [(k, v) for k, v in zip(keys, vectors) if k not in self._labels]
        if not fresh:
            return
        needed = len(self.ids) + len(fresh)
        capacity = self._index.get_max_elements()
        if needed > capacity:
            self._index.resize_index(max(needed, capacity * 2))
        labels = np.arange(len(self.ids), len(self.ids) + len(fresh), dtype=np.int64)
        self._index.add_items(np.stack([v for _, v in fresh]), labels, num_threads=1)
        for (k, _), label in zip(fresh, labels):
            self._labels[k] = int(label)
            self.ids.append(k)

    def remove(self, key: str) -> None:
        label = self._labels.get(key)
        if label is not None and label not in self._deleted:
            self._index.mark_deleted(label)
            self._deleted.add(label)

    def search(self, vector: np.ndarray, k: int, allowed: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        """The `k` nearest items as (id, cosine similarity), best first; `allowed` filters ids during the search."""
        live = len(self)
        if live == 0 or k <= 0:
            return []
        k = min(k, live)
        self._index.set_ef(max(self.ef_search, k))
        query = np.asarray(vector, dtype=np.float32).reshape(1, self.dim)
        if allowed is None:
            labels, distances = self._index.knn_query(query, k=k, num_threads=1)
        else:
            ids = self.ids
            try:
                labels, distances = self._index.knn_query(query, k=k, num_threads=1, filter=lambda l: allowed(ids[l]))
            except RuntimeError:  # fewer than k items pass the filter: hnswlib refuses, so ask for what exists
                found = self._filtered_exact(query[0], k, allowed)
                return found
        return [(self.ids[int(l)], float(1.0 - d)) for l, d in zip(labels[0], distances[0])]

    def _filtered_exact(self, vector: np.ndarray, k: int, allowed: Callable[[str], bool]) -> list[tuple[str, float]]:
        keys = [key for label, key in enumerate(self.ids) if label not in self._deleted and allowed(key)]
        if not keys:
            return []
        matrix = self.vectors(keys)
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        return [(keys[i], s) for i, s in brute_force(matrix / norms[:, None], vector / (np.linalg.norm(vector) or 1.0), k)]

    def vectors(self, keys: list[str]) -> np.ndarray:
        return np.asarray(self._index.get_items([self._labels[k] for k in keys]), dtype=np.float32)

    def save(self, path: Path) -> None:
        """Write the index file (deterministic for a deterministic build)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._index.save_index(str(path))

    @classmethod
    def load(cls, path: Path, dim: int, ids: list[str], deleted: set[str] = frozenset()) -> "HnswIndex":
        """Reopen a saved index; `ids` are the keys in label order (kept beside the index)."""
        index = cls.__new__(cls)
        index.dim = dim
        index.ef_search = HNSW_EF_SEARCH
        index._index = hnswlib.Index(space="cosine", dim=dim)
        index._index.load_index(str(path), max_elements=max(len(ids), 1))
        index._index.set_num_threads(1)
        index.ids = list(ids)
        index._labels = {k: i for i, k in enumerate(ids)}
        index._deleted = {index._labels[k] for k in deleted if k in index._labels}
        return index


def brute_force(matrix: np.ndarray, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Exact top-k by cosine over normalised rows: the reference HNSW is measured against."""
    if len(matrix) == 0:
        return []
    sims = matrix @ np.asarray(vector, dtype=np.float32)
    k = min(k, len(sims))
    top = np.argpartition(-sims, k - 1)[:k]
    top = top[np.argsort(-sims[top], kind="stable")]
    return [(int(i), float(sims[i])) for i in top]

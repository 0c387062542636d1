"""A deterministic HNSW index (hnswlib) keyed by string ids.

Replay must give the same bytes back, and hnswlib writes identical index files only when
items are added single-threaded, in the same order, with the same random seed. So: one
thread per index (parallelise across indexes, not inside one), a fixed seed, and items in
the order their events were recorded.

Two more things would make an index built live differ from one built by replay:

- Capacity. hnswlib writes `max_elements` into the file, so the capacity is a function of the
  number of items alone (`capacity_for`), however the items arrived (one batch or many).
- The level generator. hnswlib draws each new element's level from a random engine that is
  seeded at construction but not saved: an index reloaded from its file continues with a fresh
  engine, and every element added after the reload gets other levels than a continuous build
  gives it. So an index is never continued from its file: `load` (and unpickling) rebuild it
  from the stored vectors, adding them again in label order with the same seed and replaying
  the deletions where they happened (deleted elements still shape later insertions in hnswlib).

Small indexes have no graph. hnswlib allocates ~2.7 MB for every index it creates, whatever its capacity
(a lock table of 65,536 mutexes), and every agent's cognitive memory holds one per policy process: at
1,000 agents that fixed cost dominated the memory of the whole system. While an index holds at most
`EXACT_MAX` items (deleted ones included) it searches its unit vectors exactly (every index keeps them in
one array by label, graph or not: reading them back from hnswlib costs ~1 ms per 50, and recall reads
candidates' vectors several times per query); that is what the graph's search does anyway at that size (hnswlib stops only once it holds `ef`
candidates, and `ef >= EXACT_MAX`, so it visits every item). The graph is built when the index grows past
`EXACT_MAX` (or for the moment a save writes its file), from the stored vectors in label order with the deletions where they happened:
the same graph, byte for byte, as a continuous build (the `rebuilt` argument above).

Vectors are L2-normalised here, once, and stored as given in the inner-product space (which is
the cosine for unit vectors): the vectors read back for a rebuild are then bit-identical to the
first ones, where hnswlib's own cosine space would normalise them a second time.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable, Iterable

import hnswlib
import numpy as np

# hnswlib construction parameters: M links per node, ef_construction candidate list while
# building; ef_search is raised to at least k at query time.
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 64
HNSW_SEED = 100
INITIAL_CAPACITY = 1_024
SPACE = "ip"  # on unit vectors: distance 1 - cosine, as hnswlib's "cosine" space
# Up to this many items (deleted ones included) an index has no hnswlib graph: exact search (module docstring).
EXACT_MAX = HNSW_EF_SEARCH


def capacity_for(n: int, initial: int = INITIAL_CAPACITY) -> int:
    """The capacity of an index holding `n` items: `initial`, doubled until `n` fits."""
    capacity = max(1, initial)
    while capacity < n:
        capacity *= 2
    return capacity


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), in float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vectors / norms).astype(np.float32)


class HnswIndex:
    """Cosine-similarity HNSW over L2-normalised vectors, with string ids and soft deletion."""

    def __init__(self, dim: int, *, capacity: int = INITIAL_CAPACITY, ef_search: int = HNSW_EF_SEARCH):
        self.dim = dim
        self.ef_search = ef_search
        self._initial = max(1, capacity)
        self._index: hnswlib.Index | None = None  # the graph, once there are more than EXACT_MAX items
        # The items' unit vectors by label (rows beyond len(ids) unused), with or without a graph: what an exact
        # search scans, and what recall reads back (hnswlib's `get_items` costs ~1 ms per call for 50 rows, ten times
        # a search, and recall reads candidates' vectors several times per query).
        self._unit = np.zeros((0, dim), dtype=np.float32)
        self.ids: list[str] = []  # label -> id
        self._labels: dict[str, int] = {}
        self._deleted: set[int] = set()
        # (label, items added when it was deleted), in deletion order: what a rebuild replays.
        self.deletions: list[tuple[int, int]] = []
        # With a graph, a copy of its vectors by label for exact scans (`most_similar`): made on the first scan, so
        # only an index that is scanned holds one; rows of items deleted before they were copied stay zero.
        self._scan: np.ndarray | None = None
        self._scanned = 0  # labels below this are copied

    def __len__(self) -> int:
        return len(self.ids) - len(self._deleted)

    def __contains__(self, key: str) -> bool:
        label = self._labels.get(key)
        return label is not None and label not in self._deleted

    @property
    def capacity(self) -> int:
        return self._index.get_max_elements() if self._index is not None else capacity_for(len(self.ids), self._initial)

    @property
    def has_graph(self) -> bool:
        return self._index is not None

    def _graph(self) -> hnswlib.Index:
        """The hnswlib graph, built on first need from the stored vectors as a continuous build makes it: same
        seed, items in label order, each deletion marked once as many items were added as when it happened."""
        if self._index is None:
            index = _new_index(self.dim, capacity_for(len(self.ids), self._initial))
            pending = sorted(enumerate(self.deletions), key=lambda x: (x[1][1], x[0]))
            added, cursor, n = 0, 0, len(self.ids)
            while True:
                while cursor < len(pending) and pending[cursor][1][1] <= added:
                    index.mark_deleted(pending[cursor][1][0])
                    cursor += 1
                if added >= n:
                    break
                upto = min(n, pending[cursor][1][1]) if cursor < len(pending) else n
                upto = max(upto, added + 1)
                index.add_items(self._unit[added:upto], np.arange(added, upto, dtype=np.int64), num_threads=1)
                added = upto
            self._index = index
        return self._index

    def add(self, keys: list[str], vectors: np.ndarray) -> None:
        """Add items in order (single-threaded, so the index bytes depend only on the order)."""
        if not keys:
            return
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(keys), self.dim)
        fresh = [(k, v) for k, v in zip(keys, vectors) if k not in self._labels]
        if not fresh:
            return
        self._add_normalised([k for k, _ in fresh], normalise(np.stack([v for _, v in fresh])))

    def _add_normalised(self, keys: list[str], unit: np.ndarray) -> None:
        labels = np.arange(len(self.ids), len(self.ids) + len(keys), dtype=np.int64)
        unit = np.asarray(unit, dtype=np.float32).reshape(len(keys), self.dim)
        if self._index is not None or len(self.ids) + len(keys) > EXACT_MAX:
            index = self._graph()
            needed = capacity_for(len(self.ids) + len(keys), self._initial)
            if needed > index.get_max_elements():
                index.resize_index(needed)
            index.add_items(unit, labels, num_threads=1)
        end = len(self.ids) + len(keys)
        if end > len(self._unit):
            # Grown by doubling (adding one item at a time stays linear) from what the first add needs: most agents'
            # memories hold a few traces, and a floor of 8 rows (12 KB at 384 dims) for each was mostly empty, in
            # every process holding the agent's memory.
            grown = np.zeros((max(end, 2 * len(self._unit)), self.dim), dtype=np.float32)
            grown[: len(self.ids)] = self._unit[: len(self.ids)]
            self._unit = grown
        self._unit[len(self.ids):end] = unit
        for k, label in zip(keys, labels):
            self._labels[k] = int(label)
            self.ids.append(k)

    def remove(self, key: str) -> None:
        label = self._labels.get(key)
        if label is not None and label not in self._deleted:
            if self._index is not None:
                self._index.mark_deleted(label)
            self._deleted.add(label)
            self.deletions.append((label, len(self.ids)))

    def search(self, vector: np.ndarray, k: int, allowed: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        """The `k` nearest items as (id, cosine similarity), best first; `allowed` filters ids during the search."""
        live = len(self)
        if live == 0 or k <= 0:
            return []
        k = min(k, live)
        query = normalise(np.asarray(vector, dtype=np.float32).reshape(1, self.dim))
        if self._index is None:  # no graph: every item is visited, as the graph's search would at this size
            return self._filtered_exact(query[0], k, allowed or (lambda key: True))
        self._index.set_ef(max(self.ef_search, k))
        if allowed is None:
            labels, distances = self._index.knn_query(query, k=k, num_threads=1)
        else:
            ids = self.ids
            try:
                labels, distances = self._index.knn_query(query, k=k, num_threads=1, filter=lambda l: allowed(ids[l]))
            except RuntimeError:  # fewer than k items pass the filter: hnswlib refuses, so ask for what exists
                return self._filtered_exact(query[0], k, allowed)
        return [(self.ids[int(l)], float(1.0 - d)) for l, d in zip(labels[0], distances[0])]

    def most_similar(self, vector: np.ndarray, exclude: Iterable[str] = ()) -> float:
        """The highest cosine of `vector` with the items (the live ones; deleted ones may count too) but `exclude`,
        by an exact scan: an upper bound of every similarity a search, filtered or not, can return (-1.0
        when there is no item). Costs one matrix-vector product: a caller that only acts on results above
        a threshold skips its search when this is below it."""
        n = len(self.ids)
        if n == 0:
            return -1.0
        query = normalise(np.asarray(vector, dtype=np.float32).reshape(1, self.dim))[0]
        if self._index is None:  # no graph: the stored vectors are at hand
            sims = self._unit[:n] @ query
        else:
            if self._scan is None or len(self._scan) < n:
                grown = np.zeros((capacity_for(n, 64), self.dim), dtype=np.float32)
                if self._scan is not None:
                    grown[: self._scanned] = self._scan[: self._scanned]
                self._scan = grown
            if self._scanned < n:
                live = [label for label in range(self._scanned, n) if label not in self._deleted]
                if live:
                    self._scan[live] = np.asarray(self._index.get_items(live), dtype=np.float32).reshape(len(live), self.dim)
                self._scanned = n
            sims = self._scan[:n] @ query
        for key in exclude:
            label = self._labels.get(key)
            if label is not None:
                sims[label] = -1.0
        return float(sims.max())

    def _filtered_exact(self, vector: np.ndarray, k: int, allowed: Callable[[str], bool]) -> list[tuple[str, float]]:
        keys = [key for label, key in enumerate(self.ids) if label not in self._deleted and allowed(key)]
        if not keys:
            return []
        return [(keys[i], s) for i, s in brute_force(self.vectors(keys), vector, k)]

    def vectors(self, keys: list[str]) -> np.ndarray:
        """The stored (unit) vectors of live `keys`."""
        labels = [self._labels[k] for k in keys]
        return self._unit[labels].reshape(len(labels), self.dim)

    def save(self, path: Path) -> None:
        """Write the index file (deterministic for a deterministic build)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        if self._index is not None:
            self._index.save_index(str(path))
            return
        # A small index's graph is built for its file and let go: kept, it cost ~2.7 MB per agent in every
        # process that saves one (the shard's traces projection saves every agent's, at each checkpoint).
        self._graph().save_index(str(path))
        self._index = None

    @classmethod
    def load(
        cls, path: Path, dim: int, ids: list[str], deleted: Iterable[str] = frozenset(),
        deletions: Iterable[tuple[int, int]] | None = None, *, capacity: int = INITIAL_CAPACITY,
    ) -> "HnswIndex":
        """The index saved at `path`, rebuilt from its vectors (see the module docstring).

        `ids`: the keys in label order (kept beside the index). `deletions`: (label, items added then)
        in deletion order, as `deletions` recorded them; without it (files written before it was
        recorded), `deleted` keys are deleted after every item is added.
        """
        raw = hnswlib.Index(space=SPACE, dim=dim)
        raw.load_index(str(path), max_elements=max(len(ids), 1))
        if deletions is None:
            labels = {k: i for i, k in enumerate(ids)}
            deletions = [(labels[k], len(ids)) for k in sorted(deleted) if k in labels]
        deletions = [(int(label), int(at)) for label, at in deletions]
        for label, _ in deletions:
            raw.unmark_deleted(label)  # deleted items keep their vectors, and the rebuild needs them
        vectors = np.asarray(raw.get_items(list(range(len(ids)))), dtype=np.float32).reshape(len(ids), dim)
        return cls.rebuilt(dim, ids, vectors, deletions, capacity=capacity)

    @staticmethod
    def check_file(path: Path, items: int) -> None:
        """Raise ValueError unless `path` is a whole hnswlib index file of `items` elements: its header read, then
        every element's vector data and link lists walked to the exact end of the file. Catches what a crash or a
        copy can leave (a cut or padded file, a file of another index) without loading the index."""
        data = Path(path).read_bytes()
        if len(data) < _HEADER.size:
            raise ValueError(f"{path.name}: {len(data)} bytes, shorter than an hnswlib header")
        _, _, count, per_element, _, _, max_level, _, max_m, _, _, _, _ = _HEADER.unpack_from(data)
        if count != items:
            raise ValueError(f"{path.name}: {count} elements where its metadata lists {items}")
        if per_element <= 0 or max_level < 0:
            raise ValueError(f"{path.name}: not an hnswlib index header")
        at = _HEADER.size + count * per_element
        for _ in range(count):
            if at + 4 > len(data):
                raise ValueError(f"{path.name}: cut short ({len(data)} bytes)")
            at += 4 + int.from_bytes(data[at : at + 4], "little")
        if at != len(data):
            raise ValueError(f"{path.name}: {len(data)} bytes where its elements take {at}")

    @classmethod
    def rebuilt(
        cls, dim: int, ids: list[str], unit_vectors: np.ndarray, deletions: Iterable[tuple[int, int]],
        *, capacity: int = INITIAL_CAPACITY, ef_search: int = HNSW_EF_SEARCH,
    ) -> "HnswIndex":
        """The index a continuous build gives: `unit_vectors` (stored vectors, in label order) added again,
        each deletion applied once as many items were added as when it happened."""
        index = cls(dim, capacity=capacity, ef_search=ef_search)
        pending = sorted(enumerate(deletions), key=lambda x: (x[1][1], x[0]))  # by position, then deletion order
        added, cursor = 0, 0
        unit_vectors = np.asarray(unit_vectors, dtype=np.float32).reshape(len(ids), dim)
        while True:
            while cursor < len(pending) and pending[cursor][1][1] <= added:
                index.remove(ids[pending[cursor][1][0]])
                cursor += 1
            if added >= len(ids):
                break
            upto = min(len(ids), pending[cursor][1][1]) if cursor < len(pending) else len(ids)
            upto = max(upto, added + 1)
            index._add_normalised(ids[added:upto], unit_vectors[added:upto])
            added = upto
        return index

    # Pickling (policy snapshots) rebuilds too, for the same reason as `load`.
    def __getstate__(self) -> dict:
        unit = self._unit[: len(self.ids)].copy()
        return {"dim": self.dim, "ef_search": self.ef_search, "initial": self._initial, "ids": list(self.ids),
                "vectors": unit, "deletions": list(self.deletions)}

    def __setstate__(self, state: dict) -> None:
        fresh = HnswIndex.rebuilt(state["dim"], state["ids"], state["vectors"], state["deletions"],
                                  capacity=state["initial"], ef_search=state["ef_search"])
        self.__dict__.update(fresh.__dict__)


# hnswlib's index file header (HierarchicalNSW::saveIndex): offsetLevel0, max_elements, cur_element_count,
# size_data_per_element, label_offset, offsetData (size_t each), maxlevel, enterpoint_node (int each), maxM, maxM0,
# M (size_t), mult (double), ef_construction (size_t); then every element's level-0 data, then per element a
# uint32 size and that many bytes of upper-level links.
_HEADER = struct.Struct("<6Qii3QdQ")


def _new_index(dim: int, capacity: int) -> hnswlib.Index:
    index = hnswlib.Index(space=SPACE, dim=dim)
    index.init_index(
        max_elements=capacity, M=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION, random_seed=HNSW_SEED,
        allow_replace_deleted=False,
    )
    index.set_num_threads(1)
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

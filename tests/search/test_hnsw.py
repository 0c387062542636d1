"""The HNSW index gives the same bytes however it was built: live across reloads, or in one replay."""

import pickle

import numpy as np
import pytest

from engram.search.hnsw import INITIAL_CAPACITY, HnswIndex, capacity_for

DIM = 16


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def _bytes(index: HnswIndex, tmp_path, name: str) -> bytes:
    path = tmp_path / name
    index.save(path)
    return path.read_bytes()


def _reload(index: HnswIndex, tmp_path) -> HnswIndex:
    path = tmp_path / "reload.hnsw"
    index.save(path)
    return HnswIndex.load(path, DIM, list(index.ids), deletions=index.deletions)


def test_an_index_reloaded_between_ingests_writes_the_bytes_of_one_continuous_build(tmp_path):
    data = _vectors(1500)
    keys = [f"t{i}" for i in range(1500)]
    live = HnswIndex(DIM)
    for start, stop in [(0, 300), (300, 700), (700, 1100), (1100, 1500)]:  # four ingests, a restart after each
        live.add(keys[start:stop], data[start:stop])
        if start == 300:
            live.remove("t5")
            live.remove("t350")
        live = _reload(live, tmp_path)
    replay = HnswIndex(DIM)
    replay.add(keys[:700], data[:700])
    replay.remove("t5")
    replay.remove("t350")
    replay.add(keys[700:], data[700:])
    assert _bytes(live, tmp_path, "live") == _bytes(replay, tmp_path, "replay")
    assert live.capacity == replay.capacity == capacity_for(1500) == 2 * INITIAL_CAPACITY


def test_capacity_depends_only_on_the_number_of_items():
    one, many = HnswIndex(DIM), HnswIndex(DIM)
    data = _vectors(1100, seed=1)
    one.add([f"k{i}" for i in range(1100)], data)
    for i in range(0, 1100, 100):
        many.add([f"k{j}" for j in range(i, i + 100)], data[i : i + 100])
    assert one.capacity == many.capacity == 2048


def test_a_pickled_index_continues_as_the_original_would(tmp_path):
    data = _vectors(400, seed=2)
    keys = [f"p{i}" for i in range(400)]
    original = HnswIndex(DIM)
    original.add(keys[:200], data[:200])
    original.remove("p3")
    copy = pickle.loads(pickle.dumps(original))
    for index in (original, copy):
        index.add(keys[200:], data[200:])
    assert _bytes(copy, tmp_path, "copy") == _bytes(original, tmp_path, "original")
    assert "p3" not in copy and len(copy) == 399


def test_search_finds_the_nearest_item_and_skips_deleted_ones():
    index = HnswIndex(DIM)
    data = _vectors(50, seed=3)
    index.add([f"s{i}" for i in range(50)], data)
    assert index.search(data[7], 1)[0][0] == "s7"
    assert index.search(data[7], 1)[0][1] == pytest.approx(1.0, abs=1e-5)
    index.remove("s7")
    assert all(key != "s7" for key, _ in index.search(data[7], 5))


def test_the_vectors_read_back_are_the_ones_hnswlib_stores_across_growth_deletion_reload_and_pickling(tmp_path):
    # Recall reads candidates' vectors back many times per query; the index answers from its own copy, which must
    # be exactly what hnswlib holds, however the index grew (one item or a batch at a time, past its capacity).
    data = _vectors(INITIAL_CAPACITY + 40, seed=5)
    keys = [f"v{i}" for i in range(len(data))]
    index = HnswIndex(DIM)
    for i in range(10):
        index.add([keys[i]], data[i : i + 1])
    index.add(keys[10:], data[10:])
    index.remove("v4")
    wanted = ["v0", "v9", "v10", f"v{len(data) - 1}"]
    stored = np.asarray(index._index.get_items([index._labels[k] for k in wanted]), dtype=np.float32)
    assert np.array_equal(index.vectors(wanted), stored)
    norms = np.linalg.norm(data[[0, 9, 10, len(data) - 1]], axis=1, keepdims=True)
    assert np.allclose(index.vectors(wanted), data[[0, 9, 10, len(data) - 1]] / norms, atol=1e-6)
    for copy in (pickle.loads(pickle.dumps(index)), _reload(index, tmp_path)):
        assert np.array_equal(copy.vectors(wanted), index.vectors(wanted))
        assert _bytes(copy, tmp_path, "copy") == _bytes(index, tmp_path, "original")

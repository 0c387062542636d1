"""The HNSW index gives the same bytes however it was built: live across reloads, or in one replay."""

import pickle

import numpy as np
import pytest

from engram.providers.search.hnsw import HnswIndex, INITIAL_CAPACITY, capacity_for, normalise

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


def test_most_similar_is_the_exact_best_cosine_and_bounds_every_search(tmp_path):
    data = _vectors(300, seed=5)
    keys = [f"m{i}" for i in range(300)]
    index = HnswIndex(DIM)
    for k in range(0, 300, 7):  # added in several calls, past the first buffer size
        index.add(keys[k : k + 7], data[k : k + 7])
    index.remove("m11")
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    query = _vectors(1, seed=9)[0]
    exact = unit @ (query / np.linalg.norm(query))
    assert index.most_similar(query) == pytest.approx(float(exact.max()), abs=1e-5)
    best = int(exact.argmax())
    assert index.most_similar(query, exclude=[keys[best]]) == pytest.approx(float(np.sort(exact)[-2]), abs=1e-5)
    assert index.most_similar(data[11]) < 1.0 - 1e-3  # deleted before the first scan: not scanned
    for probe in _vectors(20, seed=11):
        bound = index.most_similar(probe)
        assert all(sim <= bound + 1e-5 for _, sim in index.search(probe, 10, allowed=lambda key: key.endswith("3")))
    assert _reload(index, tmp_path).most_similar(query) == index.most_similar(query)
    assert pickle.loads(pickle.dumps(index)).most_similar(query) == index.most_similar(query)
    assert HnswIndex(DIM).most_similar(query) == -1.0
    small = HnswIndex(DIM)  # no graph yet: its stored vectors are scanned
    small.add(keys[:10], data[:10])
    assert not small.has_graph
    assert small.most_similar(query, exclude=["m0"]) == pytest.approx(float(exact[1:10].max()), abs=1e-5)


def _continuous_hnswlib_build(keys_count: int, data: np.ndarray, deletions: list[tuple[int, int]], tmp_path) -> bytes:
    """The reference: hnswlib itself, one graph from the first item on, deletions marked as they happened."""
    from engram.providers.search.hnsw import _new_index, normalise

    raw = _new_index(DIM, capacity_for(keys_count))
    unit = normalise(data)
    for label in range(keys_count):
        raw.add_items(unit[label : label + 1], np.array([label]), num_threads=1)
        for deleted, at in deletions:
            if at == label + 1:
                raw.mark_deleted(deleted)
    path = tmp_path / "reference.hnsw"
    raw.save_index(str(path))
    return path.read_bytes()


def test_a_small_index_has_no_graph_and_finds_exactly_what_a_full_scan_finds():
    from engram.providers.search.hnsw import EXACT_MAX, brute_force, normalise

    data = _vectors(EXACT_MAX, seed=4)
    index = HnswIndex(DIM)
    index.add([f"e{i}" for i in range(EXACT_MAX)], data)
    index.remove("e2")
    assert not index.has_graph and len(index) == EXACT_MAX - 1
    query = _vectors(1, seed=5)[0]
    keep = [i for i in range(EXACT_MAX) if i != 2]
    expected = [(f"e{keep[i]}", s) for i, s in brute_force(normalise(data[keep]), normalise(query[None])[0], 10)]
    found = index.search(query, 10)
    assert [k for k, _ in found] == [k for k, _ in expected]
    assert [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-6)
    ranking = [f"e{keep[i]}" for i, _ in brute_force(normalise(data[keep]), normalise(query[None])[0], len(keep))]
    assert [k for k, _ in index.search(query, 3, allowed=lambda key: key.endswith("1"))] == \
        [k for k in ranking if k.endswith("1")][:3]


def test_an_index_grown_past_the_exact_size_writes_the_bytes_of_a_graph_built_from_the_first_item(tmp_path):
    from engram.providers.search.hnsw import EXACT_MAX

    n = EXACT_MAX + 40
    data = _vectors(n, seed=6)
    index = HnswIndex(DIM)
    index.add([f"g{i}" for i in range(30)], data[:30])
    index.remove("g4")  # deleted while there was no graph: replayed at its position when the graph is built
    index.add([f"g{i}" for i in range(30, n)], data[30:])
    index.remove("g70")
    assert index.has_graph
    assert _bytes(index, tmp_path, "grown") == _continuous_hnswlib_build(n, data, [(4, 30), (70, n)], tmp_path)


def test_a_thousand_small_indexes_cost_a_fraction_of_what_a_thousand_graphs_did():
    """hnswlib allocates ~2.7 MB for every graph (its lock table), whatever it holds: 1,000 agents' memories of a
    few traces each held ~2.7 GB per policy process. Without a graph they hold their vectors."""

    def rss_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 1e6

    data = _vectors(8, seed=7)
    before = rss_mb()
    indexes = []
    for n in range(1000):
        index = HnswIndex(384)
        index.add([f"a{n}-{i}" for i in range(8)], np.repeat(data, 24, axis=1))
        indexes.append(index)
    grown = rss_mb() - before
    assert grown < 200, f"{grown:.0f} MB for 1,000 small indexes"
    assert not any(index.has_graph for index in indexes)


def test_an_index_stores_rows_for_what_it_holds_not_a_fixed_floor():
    # An agent's memory of one trace holds one vector's row (1.5 KB), not eight; growth doubles from there.
    data = _vectors(8, seed=3)
    index = HnswIndex(DIM)
    index.add(["a"], data[:1])
    assert index._unit.nbytes == DIM * 4
    index.add(["b"], data[1:2])
    index.add(["c"], data[2:3])
    assert len(index._unit) == 4
    assert np.array_equal(index.vectors(["a", "b", "c"]), normalise(data[:3]))


def test_saving_a_small_index_writes_its_graph_file_but_keeps_no_graph_in_memory(tmp_path):
    """The shard's traces projection saves every agent's index at each checkpoint: a graph kept after the save
    cost ~2.7 MB per agent (3.4 MB per agent of a 4-message chat, measured in-process)."""
    data = _vectors(8, seed=8)
    index = HnswIndex(DIM)
    index.add([f"s{i}" for i in range(8)], data)
    index.save(tmp_path / "small.hnsw")
    assert not index.has_graph
    assert (tmp_path / "small.hnsw").read_bytes() == _continuous_hnswlib_build(8, data, [], tmp_path)
    again = _reload(index, tmp_path)
    assert [k for k, _ in again.search(data[3], 3)] == [k for k, _ in index.search(data[3], 3)]


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

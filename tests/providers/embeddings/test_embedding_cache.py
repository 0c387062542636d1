"""The content-addressed embedding cache: texts already embedded are never computed again."""

from __future__ import annotations

import numpy as np

from engram.providers.embeddings import CachedEmbedder, EmbeddingCache
from engram.providers.embeddings.cache import text_key
from engram.providers.embeddings.hashing import HashingEmbedder

TEXTS = ["Caroline went to a support group.", "Melanie painted a lake sunrise.", "Melanie took the kids swimming."]


def test_vectors_round_trip_through_duckdb_as_float32(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache" / "embeddings.duckdb")
    vectors = np.random.default_rng(0).normal(size=(3, 384)).astype(np.float32)
    keys = [text_key(t) for t in TEXTS]
    cache.put_many("m", keys, vectors)
    got = cache.get_many("m", keys + ["absent"])
    assert set(got) == set(keys)
    assert all(np.array_equal(got[k], v) for k, v in zip(keys, vectors))
    assert cache.get_many("other-model", keys) == {}
    cache.close()


def test_re_embedding_cached_texts_computes_nothing(tmp_path):
    embedder = CachedEmbedder(HashingEmbedder(), EmbeddingCache(tmp_path / "e.duckdb"))
    first = embedder.embed(TEXTS)
    second = embedder.embed(list(reversed(TEXTS)))
    assert np.array_equal(second, first[::-1])
    s = embedder.stats
    assert (s.calls, s.texts_requested, s.texts_computed, s.cache_hits) == (2, 6, 3, 3)


def test_a_text_repeated_within_one_call_is_computed_once(tmp_path):
    embedder = CachedEmbedder(HashingEmbedder(), EmbeddingCache(tmp_path / "e.duckdb"))
    v = embedder.embed([TEXTS[0], TEXTS[0], TEXTS[1]])
    assert embedder.stats.texts_computed == 2 and np.array_equal(v[0], v[1])


def test_replay_with_a_fresh_process_computes_no_embedding(tmp_path):
    path = tmp_path / "cache" / "embeddings.duckdb"
    live = CachedEmbedder(HashingEmbedder(), EmbeddingCache(path))
    original = live.embed(TEXTS)
    live.cache.close()  # the process ends

    replay = CachedEmbedder(HashingEmbedder(), EmbeddingCache(path))  # rebuilding an index from the log
    again = replay.embed(TEXTS)
    assert replay.stats.texts_computed == 0 and replay.stats.cache_hits == 3
    assert np.array_equal(again, original)
    replay.cache.close()


def test_vectors_of_different_models_never_mix(tmp_path):
    cache = EmbeddingCache(tmp_path / "e.duckdb")
    small, large = CachedEmbedder(HashingEmbedder(64), cache), CachedEmbedder(HashingEmbedder(384), cache)
    assert small.embed(TEXTS[:1]).shape == (1, 64)
    assert large.embed(TEXTS[:1]).shape == (1, 384)
    assert large.stats.texts_computed == 1  # the 64-dim vector was not taken for the 384-dim model
    assert cache.count() == 2


def test_written_behind_vectors_are_served_from_memory_and_written_in_one_insert(tmp_path):
    path = tmp_path / "e.duckdb"
    cache = EmbeddingCache(path, write_behind=3)
    embedder = CachedEmbedder(HashingEmbedder(), cache)
    first = embedder.embed(TEXTS[:2])
    assert cache.waiting == 2 and cache.count() == 2
    assert np.array_equal(embedder.embed(TEXTS[:2]), first) and embedder.stats.texts_computed == 2
    embedder.embed(TEXTS[2:])  # the third waiting vector: all three are written together
    assert cache.waiting == 0
    embedder.embed(["one more, kept in memory"])
    cache.close()  # writes what waits

    again = CachedEmbedder(HashingEmbedder(), EmbeddingCache(path))
    again.embed(TEXTS + ["one more, kept in memory"])
    assert (again.stats.texts_computed, again.stats.cache_hits) == (0, 4)
    again.cache.close()


def test_recently_written_or_read_vectors_are_served_without_a_query(tmp_path, monkeypatch):
    from engram.providers.embeddings import cache as cache_module

    monkeypatch.setattr(cache_module, "RECENT_VECTORS", 2)
    cache = EmbeddingCache(tmp_path / "e.duckdb")  # every put is written at once
    embedder = CachedEmbedder(HashingEmbedder(), cache)
    first = embedder.embed(TEXTS[:2])
    queried = []
    read = cache._read
    monkeypatch.setattr(cache, "_read", lambda model, keys: queried.append(list(keys)) or read(model, keys))
    assert np.array_equal(embedder.embed(TEXTS[:2]), first) and queried == []  # from memory
    embedder.embed(TEXTS[2:3])  # a third vector: the oldest of the two leaves memory
    assert np.array_equal(embedder.embed(TEXTS[:1]), first[:1]) and len(queried) == 1  # read from the file again
    assert embedder.stats.texts_computed == 3
    cache.close()

"""Concurrent embedding requests coalesced into model rounds (the home's embedder service, without Ray)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from engram.providers.embeddings.batcher import EmbedBatcher
from engram.providers.embeddings.hashing import HashingEmbedder


class GatedEmbedder:
    """The hashing embedder, recording each call's texts; a call waits while the gate is closed."""

    def __init__(self):
        self.inner = HashingEmbedder()
        self.name, self.dim, self.is_fallback = self.inner.name, self.inner.dim, True
        self.calls: list[list[str]] = []
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.fail_next = False

    def embed(self, texts):
        self.calls.append(list(texts))
        self.entered.set()
        assert self.gate.wait(10)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("model crashed")
        return self.inner.embed(texts)


def _wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def _start(batcher: EmbedBatcher, texts: list[str], out: dict, key: str) -> threading.Thread:
    def run():
        try:
            out[key] = batcher.embed(texts)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out[key] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_requests_arriving_while_the_model_runs_are_embedded_together_in_the_next_round():
    model = GatedEmbedder()
    batcher = EmbedBatcher(model)
    out: dict = {}
    first = _start(batcher, ["the first request"], out, "first")
    assert model.entered.wait(10)  # the first request is in the model; the next ones queue behind it
    others = [_start(batcher, [f"agent {k} says hello", "shared text"], out, f"agent-{k}") for k in range(5)]
    _wait_until(lambda: batcher.requests == 6)
    model.gate.set()
    for t in [first, *others]:
        t.join(10)
    assert model.calls[0] == ["the first request"]
    assert len(model.calls) == 2 and len(model.calls[1]) == 10  # five requests, one round
    assert batcher.rounds == 2 and batcher.requests == 6
    reference = HashingEmbedder()
    for k in range(5):
        assert np.array_equal(out[f"agent-{k}"], reference.embed([f"agent {k} says hello", "shared text"]))
    assert np.array_equal(out["first"], reference.embed(["the first request"]))


def test_callers_are_held_back_while_too_many_texts_wait():
    model = GatedEmbedder()
    batcher = EmbedBatcher(model, max_texts=4, max_waiting=4)
    out: dict = {}
    first = _start(batcher, ["a"], out, "first")
    assert model.entered.wait(10)
    queued = _start(batcher, ["b", "c", "d"], out, "queued")  # fits: three texts wait
    _wait_until(lambda: batcher.requests == 2)
    held = _start(batcher, ["e", "f"], out, "held")  # 3 + 2 > 4: waits for room, not queued
    _wait_until(lambda: batcher.requests == 3)
    time.sleep(0.05)
    assert batcher.most_waiting == 3 and "held" not in out
    model.gate.set()
    for t in (first, queued, held):
        t.join(10)
    assert [len(c) for c in model.calls] == [1, 3, 2]
    assert batcher.most_waiting == 3  # never more than the bound waited
    assert out["held"].shape == (2, model.dim)


def test_a_request_larger_than_the_bound_is_admitted_alone():
    model = GatedEmbedder()
    model.gate.set()
    batcher = EmbedBatcher(model, max_texts=2, max_waiting=2)
    vectors = batcher.embed([f"text {k}" for k in range(5)])
    assert vectors.shape == (5, model.dim) and model.calls == [[f"text {k}" for k in range(5)]]


def test_a_failed_round_fails_each_of_its_requests_and_the_next_round_works():
    model = GatedEmbedder()
    batcher = EmbedBatcher(model)
    out: dict = {}
    first = _start(batcher, ["warm"], out, "first")
    assert model.entered.wait(10)
    a = _start(batcher, ["x"], out, "a")
    b = _start(batcher, ["y"], out, "b")
    _wait_until(lambda: batcher.requests == 3)
    model.fail_next = True  # the first round fails: the request in it gets the error
    model.gate.set()
    for t in (first, a, b):
        t.join(10)
    assert isinstance(out["first"], RuntimeError)
    assert out["a"].shape == out["b"].shape == (1, model.dim)
    with pytest.raises(RuntimeError):
        model.fail_next = True
        batcher.embed(["z"])
    assert batcher.embed(["z"]).shape == (1, model.dim)


def test_no_texts_cost_no_round():
    model = GatedEmbedder()
    batcher = EmbedBatcher(model)
    assert batcher.embed([]).shape == (0, model.dim) and model.calls == [] and batcher.rounds == 0


def test_a_request_of_cached_texts_is_answered_while_the_model_runs_another_round():
    from engram.providers.embeddings import CachedEmbedder, EmbeddingCache

    model = GatedEmbedder()
    model.gate.set()
    cached = CachedEmbedder(model, EmbeddingCache(":memory:"))
    batcher = EmbedBatcher(cached)
    known = batcher.embed(["a memory the shard indexes", "another one"])  # computed once, now cached
    model.gate.clear()
    model.entered.clear()
    out: dict = {}
    busy = _start(batcher, ["a new message"], out, "busy")
    assert model.entered.wait(10)  # the model is in a round of other texts, held there
    again = batcher.embed(["another one", "a memory the shard indexes", "another one"])  # not queued behind it
    assert np.array_equal(again, known[[1, 0, 1]])
    assert batcher.served_from_cache == 1 and "busy" not in out
    model.gate.set()
    busy.join(10)
    assert out["busy"].shape == (1, model.dim)
    assert len(model.calls) == 2  # the cached request never reached the model
    assert cached.stats.texts_computed == 3 and cached.stats.cache_hits == 2


def test_concurrent_queries_of_one_process_share_one_model_call_and_get_their_own_vectors(monkeypatch, tmp_path):
    """The query-time embedder (a recall's, a search's): queries arriving while the model runs go together in its
    next call; a lone query runs at once."""
    import engram.providers.embeddings.factory as factory
    from engram.config.service import load_service_config
    from engram.providers.services import query_embedder

    real = factory.make_embedder(factory.single_threaded())
    if real.is_fallback:
        pytest.skip("the MiniLM model is not installed")
    gated = GatedEmbedder()
    gated.inner, gated.name, gated.dim, gated.is_fallback = real, real.name, real.dim, False
    monkeypatch.setattr(factory, "make_embedder", lambda config=None, **kw: gated)
    embedder = query_embedder(load_service_config(tmp_path))
    queries = [f"Which charting library did we pick for dashboard {i}?" for i in range(8)]
    out: dict = {}
    first = _start(embedder, ["When is the launch?"], out, "first")
    assert gated.entered.wait(10)  # the model runs the first query ...
    others = [_start(embedder, [q], out, q) for q in queries]
    _wait_until(lambda: embedder.embedder._waiting == len(queries))  # ... while eight more arrive
    gated.gate.set()
    for th in [first, *others]:
        th.join(10)
    assert gated.calls == [["When is the launch?"], queries]  # two model calls for nine queries
    for q in queries:
        assert np.allclose(out[q], real.embed([q]), atol=1e-5)  # each caller gets its own query's vector
    assert np.allclose(out["first"], real.embed(["When is the launch?"]), atol=1e-5)

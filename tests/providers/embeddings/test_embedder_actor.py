"""The Embedder actor on the test session's real local Ray instance (two small integration tests)."""

from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray")


@pytest.mark.ray
def test_the_actor_embeds_batches_and_serves_repeats_from_its_cache(ray_session, tmp_path):
    from engram.actors.embedder import EmbedderActor

    actor = EmbedderActor.remote(str(tmp_path), {"name": "auto"})
    texts = ["the cat sat on the mat", "a cat was sitting on a rug", "quarterly tax filing deadline"]
    first = ray.get(actor.embed.remote(texts))
    again = ray.get(actor.embed.remote(texts))
    assert ray.get(actor.info.remote()) == {"name": "all-MiniLM-L6-v2-onnx-int8", "dim": 384, "is_fallback": False}
    assert first.shape == (3, 384) and first.dtype == np.float32 and np.array_equal(first, again)
    assert first[0] @ first[1] > first[0] @ first[2]
    stats = ray.get(actor.stats.remote())
    assert {k: stats[k] for k in ("requests", "calls", "texts_requested", "texts_computed", "cache_hits")} == {
        "requests": 2, "calls": 2, "texts_requested": 6, "texts_computed": 3, "cache_hits": 3}
    assert stats["model_seconds"] > 0
    assert (tmp_path / "cache" / "embeddings.duckdb").exists()
    ray.kill(actor)


@pytest.mark.ray
def test_concurrent_requests_to_the_actor_share_model_rounds_and_each_gets_its_own_vectors(ray_session, tmp_path):
    from engram.actors.embedder import EmbedderActor
    from engram.providers.embeddings import make_embedder

    actor = EmbedderActor.remote(str(tmp_path), {"name": "auto"})
    ray.get(actor.warm.remote())
    requests = [[f"agent {a} remembers item {k} of the shopping list" for k in range(8)] for a in range(20)]
    refs = [actor.embed.remote(texts) for texts in requests]  # all in flight at once, as from many actors
    results = ray.get(refs)
    stats = ray.get(actor.stats.remote())
    assert stats["requests"] == 20 and stats["calls"] < 20  # coalesced into fewer model rounds
    reference = make_embedder()
    for texts, vectors in zip(requests[:3], results[:3]):
        assert np.allclose(vectors, reference.embed(texts), atol=1e-5)
    ray.kill(actor)

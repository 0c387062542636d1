"""The index-time embedder is one service per home behind the DuckDB cache: a text is embedded once.

In process (no Ray): a local cached embedder. On Ray: the home's one named EmbedderActor, which
the Summarizer actors call in batches (they load no model of their own).
"""

from __future__ import annotations

import pytest
from tests.memory.discussion.conftest import AGENT, T0, events, ingest, messages, write_settings

from engram.events.control import GenerationStarted
from engram.events.envelope import NewEvent, Write
from engram.providers.embeddings.cache import CACHE_RELATIVE_PATH

# Standard mode cuts 5 messages of 25 tokens (the message threshold); consolidation mode, where only
# the token threshold applies, cuts 8: a regeneration makes different chunks, a second one the same.
SETTINGS = dict(chunkEstimatedTokenSize=200, vectorMemoryChunkEstimatedTokenSize=200)


def regenerate(engine, discussion: str, generation: int) -> None:
    event = GenerationStarted(generation=generation, reason="test")
    engine.append([Write(discussion, AGENT, (NewEvent(event, T0 + 10**9 + generation, f"generation:{generation}"),))])
    engine.settle()


def vector_memories(engine, discussion: str, generation: int):
    return [r.event for r in events(engine, discussion, "VectorMemoryStored") if r.event.generation == generation]


def counters(embedder) -> tuple[int, int, int]:
    s = embedder.stats
    return s.calls, s.texts_computed, s.cache_hits


def test_regenerating_the_same_texts_computes_no_embedding_twice_and_replay_computes_none(engine, tmp_path):
    write_settings(engine.home.root, **SETTINGS)
    ingest(engine, "e", messages(28, tokens=25))
    embedder = engine.services["embedder"]
    assert len(vector_memories(engine, "e", 0)) == 5
    assert counters(embedder)[1:] == (5, 0)

    regenerate(engine, "e", 1)  # consolidation mode: three new chunks, three new texts
    assert len(vector_memories(engine, "e", 1)) == 3 and counters(embedder)[1:] == (8, 0)
    regenerate(engine, "e", 2)  # the same three chunks again: every vector comes from the cache
    calls, computed, hits = counters(embedder)
    assert (computed, hits) == (8, 3)
    assert [m.embedding for m in vector_memories(engine, "e", 2)] == [m.embedding for m in vector_memories(engine, "e", 1)]

    # Replay and re-indexing read the recorded vectors: the embedder is not even asked.
    engine.shard.replay_into(tmp_path / "replayed")
    engine.shard.rebuild()
    assert engine.shard.verify_replay() == []
    assert counters(embedder) == (calls, computed, hits)
    assert (engine.home.root / CACHE_RELATIVE_PATH).exists()


def test_the_cache_outlives_the_process_that_filled_it(engine):
    from tests.memory.discussion.engine import LocalEngine

    write_settings(engine.home.root, **SETTINGS)
    ingest(engine, "e", messages(28, tokens=25))
    regenerate(engine, "e", 1)
    engine.close()
    with LocalEngine(engine.home.root) as again:  # a new embedder: nothing in memory, only the cache file
        regenerate(again, "e", 2)
        assert len(vector_memories(again, "e", 2)) == 3
        assert counters(again.services["embedder"])[1:] == (0, 3)


def test_query_time_embedding_stays_in_process_and_off_the_cache(engine):
    import numpy as np

    query, index = engine.services["query_embedder"], engine.services["embedder"]
    vector = query.embed(["Where does the Stardust launch happen?"])
    assert query.name == index.name and index.stats.calls == 0  # the cached embedder was not asked
    assert np.allclose(vector, index.embed(["Where does the Stardust launch happen?"]), atol=1e-4)


def decisions(engine) -> list[tuple]:
    """The discussion's events in log order, without their latencies (the one thing that may differ)."""
    return [(r.type, getattr(r.event, "memory_id", None), getattr(r.event, "summary", None),
             getattr(r.event, "embedding", None)) for r in events(engine, "e")]


class Overlapping:
    """The home's embedder answering as the EmbedderActor does: `embed_async` starts the work and
    the function it returns waits for it."""

    def __init__(self, inner):
        self.inner, self.started, self.waited = inner, 0, 0

    name = property(lambda self: self.inner.name)
    dim = property(lambda self: self.inner.dim)

    def embed(self, texts):
        return self.inner.embed(texts)

    def embed_async(self, texts):
        self.started += 1
        vectors = self.inner.embed(texts)

        def wait():
            self.waited += 1
            return vectors

        return wait


def test_periodic_flushes_append_once_their_embeddings_arrive_and_the_log_is_the_same(engine, tmp_path, monkeypatch):
    from tests.memory.discussion.engine import LocalEngine

    monkeypatch.setattr("engram.policies.summarizer.FLUSH_INTERVAL_S", 0.0)  # a periodic flush after every event
    overlapping = Overlapping(engine.services["embedder"])
    engine.summarizer._embedder = overlapping
    write_settings(engine.home.root, **SETTINGS)
    ingest(engine, "e", messages(28, tokens=25))
    home = tmp_path / "waiting"
    home.mkdir()
    write_settings(home, **SETTINGS)
    monkeypatch.undo()
    with LocalEngine(home) as waiting:  # every flush waits for its embeddings
        ingest(waiting, "e", messages(28, tokens=25))
        expected = decisions(waiting)
    assert decisions(engine) == expected
    assert overlapping.started == overlapping.waited >= 2


@pytest.mark.ray
def test_on_ray_the_summarizers_embed_through_the_homes_one_embedder_actor(engram_client):
    import ray

    from engram.actors.embedder import EMBEDDER_ROLE
    from engram.memory.ingest.messages import discussion_write

    mem = engram_client
    (mem.config.home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(
        '{"chunkEstimatedTokenSize": 200, "vectorMemoryChunkEstimatedTokenSize": 200}')
    seen = []
    for discussion in ("ray-a", "ray-b"):  # the same messages twice (on one Summarizer actor of the pool or both)
        mem.sync_settings(AGENT)
        mem.append([discussion_write(AGENT, discussion, messages(28, tokens=25), max_message_chars=100_000)])
        assert mem.wait_idle(timeout=120)
        actor = ray.get_actor(mem.runtime.actor_name(EMBEDDER_ROLE))  # the home's one, by its name
        seen.append(ray.get(actor.stats.remote()))
    _, rows = mem.sql("SELECT stream, count(*), count(DISTINCT payload->>'embedding') FROM events "
                      "WHERE type = 'VectorMemoryStored' GROUP BY stream ORDER BY stream")
    assert rows == [("ray-a", 5, 5), ("ray-b", 5, 5)]
    first, second = seen
    # Every index-time embedding of the home went through the actor (the Summarizer's five memory
    # texts among them), in batches; the second, identical discussion was served from its cache.
    assert first["texts_computed"] >= 5 and first["calls"] < first["texts_requested"]
    assert second["texts_computed"] == first["texts_computed"]
    assert second["texts_requested"] - first["texts_requested"] >= 5 and second["cache_hits"] >= 5

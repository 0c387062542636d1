"""The services policies and projections are given: memory tasks (LLM) and the embedder.

Built once per process from the service configuration. Parts of engram that are not
installed in this build are simply absent from the dict.

    "config"    the ServiceConfig
    "tasks"     the memory tasks (`engram.providers.llm.make_tasks`: anthropic with a key, else offline)
    "embedder"  the index-time embedder: texts in, float32 (n, dim) L2-normalised vectors out,
                behind the home's content-addressed cache (`<home>/cache/embeddings.duckdb`), so a
                text is embedded once per model, ever. In the Ray runtime the actors pass the home's
                one named EmbedderActor (`engram.actors.embedder.RemoteEmbedder`), called once per
                batch; without Ray, a local `CachedEmbedder` loaded on first use.
    "query_embedder"  query-time embedding (a search, a recall): the same model in this process,
                one thread, no cache, loaded on first use. One query costs about 5 ms here against
                about 15 ms through the actor and its cache (bench/discussion_memory.py); discussion
                searches embed in their reading process the same way (`engram.memory.discussion.memory_files`).
                It never queues behind index-time work (that is the embedder actor's model). Concurrent
                queries of the process share model calls (`EmbedBatcher`, no window: a lone query runs
                at once, queries arriving while the model runs go together in its next call, at most
                QUERY_TEXTS_PER_ROUND texts): on 2 busy cores 8 concurrent queries are then answered at
                about 1.3x the rate, with half the p99 of 8 single-query calls competing for the cores.
"""

from __future__ import annotations

import threading
from typing import Any

from engram.config.service import ServiceConfig
from engram.providers.embeddings.base import Embedder


def build_services(config: ServiceConfig, *, embedder=None) -> dict[str, Any]:
    """`embedder`: the index-time embedder to use (the Ray runtime's actors pass the home's actor);
    None: a local cached one."""
    services: dict[str, Any] = {"config": config}
    try:
        from engram.providers.llm.factory import make_tasks
    except ImportError:
        pass
    else:
        services["tasks"] = make_tasks(config.llm, home=config.home)
    try:
        services["embedder"] = embedder if embedder is not None else index_embedder(config)
        services["query_embedder"] = query_embedder(config)
    except ImportError:
        pass
    return services


def index_embedder(config: ServiceConfig):
    """The embedder of index-time work in this process: a local cached one, loaded on first use."""
    from engram.providers.embeddings.factory import index_time, open_cached_embedder
    from engram.providers.embeddings.lazy import LazyEmbedder

    return LazyEmbedder(lambda: open_cached_embedder(config.home, index_time(config.embedder)))


# Texts one query-time model call embeds at most: a query that arrives while the model runs waits for one call of
# other queries (a few ms each), never for a throughput-sized batch.
QUERY_TEXTS_PER_ROUND = 16


def query_embedder(config: ServiceConfig) -> Embedder:
    """The embedder of query-time work: the configured model in this process, one thread, uncached; concurrent
    queries coalesced into shared model calls."""
    from engram.providers.embeddings.batcher import EmbedBatcher
    from engram.providers.embeddings.factory import make_embedder, single_threaded
    from engram.providers.embeddings.lazy import LazyEmbedder

    return LazyEmbedder(lambda: EmbedBatcher(make_embedder(single_threaded(config.embedder)),
                                             max_texts=QUERY_TEXTS_PER_ROUND))


_lock = threading.Lock()
_local_embedders: dict[str, Any] = {}
# One onnxruntime thread per process that embeds in-process: on the 2-core target, Ray actors run
# beside us and a second intra-op thread makes short queries wait (the discussion layer measured
# query p99 13–16 ms with one thread against 135–158 ms with two). A configured count is kept.
EMBEDDER_THREADS = 1


def embedder_of(services: dict[str, Any]):
    """The embedder service; without one (no cache actor in this build), the configured model in-process.

    Loaded once per process and shared by every policy and projection of the process.
    """
    if services.get("embedder") is not None:
        return services["embedder"]
    from engram.providers.embeddings import make_embedder

    from engram.config.llm import EmbedderConfig

    config = services.get("config")
    wanted = config.embedder if config is not None else EmbedderConfig()
    if wanted.threads is None:
        wanted = wanted.model_copy(update={"threads": EMBEDDER_THREADS})
    key = wanted.model_dump_json()
    with _lock:
        found = _local_embedders.get(key)
        if found is None:
            found = _local_embedders[key] = make_embedder(wanted)
    return found

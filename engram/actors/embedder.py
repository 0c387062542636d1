"""The Embedder actor: one process per engram home that owns the embedding model and its cache file.

A thin Ray shell around `EmbedBatcher` over a `CachedEmbedder` (all logic lives there): policies and
projections send texts in batches and get float32 vectors back, so the model is loaded once per home
instead of once per process, and it is the only writer of `<home>/cache/embeddings.duckdb`. Calls
run concurrently (`EMBEDDER_CONCURRENCY` threads); the batcher coalesces the requests that arrive
while the model is busy into one cache lookup and full model batches across agents and discussions,
and holds callers back when too many texts wait. The runtime starts it with the policies (named
`engram-<home>-embedder`); `RemoteEmbedder` is how the other actors of the home reach it through the
`"embedder"` service (`engram.providers.services`).
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

import numpy as np
import ray

from engram.config.llm import EmbedderConfig
from engram.providers.embeddings.batcher import EmbedBatcher
from engram.providers.embeddings.base import Embedder
from engram.providers.embeddings.cached import CachedEmbedder, EmbedStats
from engram.providers.embeddings.factory import open_cached_embedder

EMBEDDER_ROLE = "embedder"
# Calls served at once: requests of every shard and policy actor of the home, waiting to be coalesced
# (the batcher bounds the texts they hold; a call beyond this many queues in Ray).
EMBEDDER_CONCURRENCY = 16


# Embedding a text is idempotent (and the cache makes a repeat free): calls are safe to retry.
# (Ray 2.60's typed overloads of `ray.remote(**options)` list a task's options only, not an actor's.)
@ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=EMBEDDER_CONCURRENCY)  # type: ignore[call-overload]
class EmbedderActor:
    def __init__(self, home: str, embedder: dict | None = None):
        # Settings travel as their JSON form: plain data crosses process boundaries best.
        self._home = home
        self._config = EmbedderConfig.model_validate(embedder or {})
        self._embedder: Embedder | None = None  # loaded by `warm` (the runtime calls it as the policies start) or the first call
        self._batcher: EmbedBatcher | None = None
        self._lock = threading.Lock()  # calls run on several threads: one of them loads the model
        self._prepared: tuple[EmbedderConfig, CachedEmbedder] | None = None  # (config, CachedEmbedder): the embedder `engram reindex` prepares

    def _get(self) -> EmbedBatcher:
        batcher = self._batcher
        if batcher is None:
            with self._lock:
                if self._batcher is None:
                    # Uncached, with a warning, only if another process holds the cache file.
                    self._embedder = open_cached_embedder(self._home, self._config)
                    self._batcher = EmbedBatcher(self._embedder)
                batcher = self._batcher
        return batcher

    def warm(self) -> bool:
        """Load the model now, so that the first batch of memories does not wait for it."""
        self._get()
        return True

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._get().embed(texts)

    def info(self) -> dict:
        e = self._get()
        return {"name": e.name, "dim": e.dim, "is_fallback": e.is_fallback}

    def stats(self) -> dict:
        """`calls`: cache lookups (each serving one or more `requests`; `served_from_cache`: requests answered
        from the cache at once, without queueing); texts asked for, computed, served from the cache; seconds in
        the model; the most texts that waited at once."""
        batcher = self._get()
        s = getattr(self._embedder, "stats", None) or EmbedStats()
        return {"requests": batcher.requests, "served_from_cache": batcher.served_from_cache, "calls": s.calls, "texts_requested": s.texts_requested,
                "texts_computed": s.texts_computed, "cache_hits": s.cache_hits,
                "model_seconds": round(s.model_seconds, 3), "most_waiting": batcher.most_waiting}

    def retain(self, model: str, keys: list[str]) -> int:
        """The cache keeps only these vectors (after a forget); entries removed."""
        self._get()
        retain = getattr(self._embedder, "retain", None)
        return retain(model, set(keys)) if retain is not None else 0

    def prepare(self, embedder: dict, texts: list[str]) -> str:
        """Embed `texts` with the embedder `embedder` (another one than this actor serves with) into the cache, for
        `engram reindex`; returns that embedder's name. This actor keeps serving with its own meanwhile."""
        from engram.providers.embeddings.cache import EmbeddingCache
        from engram.providers.embeddings.factory import cache_path, reembed_into

        self._get()
        config = EmbedderConfig.model_validate(embedder)
        if self._prepared is None or self._prepared[0] != config:
            cache = getattr(self._embedder, "cache", None) or EmbeddingCache(cache_path(self._home))
            self._prepared = (config, reembed_into(cache, config, []))
        prepared = self._prepared[1]
        if texts:
            prepared.embed(texts)
            prepared.cache.flush()
        return prepared.name

    def prepared_info(self) -> dict:
        """What `info` says, of the embedder `prepare` was last given."""
        if self._prepared is None:
            raise RuntimeError("prepare() first: no embedder is being prepared")
        e = self._prepared[1]
        return {"name": e.name, "dim": e.dim, "is_fallback": getattr(e, "is_fallback", False)}

    def prepared_embed(self, texts: list[str]) -> np.ndarray:
        """Vectors by the embedder `prepare` was last given."""
        if self._prepared is None:
            raise RuntimeError("prepare() first: no embedder is being prepared")
        return self._prepared[1].embed(texts)

    def close(self) -> bool:
        """Close the cache file (a later call opens it again)."""
        with self._lock:
            cache = getattr(self._embedder, "cache", None)
            if cache is not None:
                cache.close()
            self._embedder = None
            self._batcher = None
            self._prepared = None
        return True


class RemoteEmbedder:
    """The home's EmbedderActor as an `Embedder`: each `embed` is one remote call for the whole batch.

    The actor is looked up by name on first use; the runtime starts it before the actors that use
    it. Without a runtime (an actor hosted by hand), the first user starts it itself.
    """

    def __init__(self, actor_name: str, home: str, embedder: dict | None = None):
        self.actor_name = actor_name
        self._home = home
        self._config = embedder or {}
        self._handle = None
        self._info: dict | None = None
        self._lock = threading.Lock()

    def _actor(self):
        if self._handle is None:
            with self._lock:
                if self._handle is None:
                    try:
                        self._handle = ray.get_actor(self.actor_name)
                    except ValueError:
                        self._handle = EmbedderActor.options(name=self.actor_name, get_if_exists=True, enable_task_events=False).remote(
                            self._home, self._config
                        )
        return self._handle

    def _described(self) -> dict:
        if self._info is None:
            self._info = ray.get(self._actor().info.remote())
        return self._info

    @property
    def name(self) -> str:
        return self._described()["name"]

    @property
    def dim(self) -> int:
        return self._described()["dim"]

    @property
    def is_fallback(self) -> bool:
        return self._described()["is_fallback"]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_async(texts)()

    def embed_async(self, texts: Sequence[str]) -> Callable[[], np.ndarray]:
        """Start embedding `texts`; the returned function waits for the vectors."""
        if not texts:
            return lambda: np.zeros((0, self.dim), dtype=np.float32)
        ref = self._actor().embed.remote(list(texts))
        return lambda: ray.get(ref)

    def retain(self, model: str, keys: set[str]) -> int:
        """The home's cache keeps only these vectors (after a forget)."""
        return ray.get(self._actor().retain.remote(model, sorted(keys)))

    @property
    def stats(self) -> EmbedStats:
        """The actor's cache counters (calls, texts requested, computed, served from the cache)."""
        fields = set(EmbedStats.__struct_fields__)
        return EmbedStats(**{k: v for k, v in ray.get(self._actor().stats.remote()).items() if k in fields})


class PreparedEmbedder(RemoteEmbedder):
    """The embedder `engram reindex` prepared in the home's EmbedderActor beside the one it serves with (`prepare`):
    what a shard's new generation of projections embeds with while the old generation keeps serving."""

    def _actor(self):
        if self._handle is None:
            self._handle = ray.get_actor(self.actor_name)  # never started here: the runtime prepared it
        return self._handle

    def _described(self) -> dict:
        if self._info is None:
            self._info = ray.get(self._actor().prepared_info.remote())
        return self._info

    def embed_async(self, texts: Sequence[str]) -> Callable[[], np.ndarray]:
        if not texts:
            return lambda: np.zeros((0, self.dim), dtype=np.float32)
        ref = self._actor().prepared_embed.remote(list(texts))
        return lambda: ray.get(ref)

    def retain(self, model: str, keys: set[str]) -> int:
        raise NotImplementedError("a prepared embedder only embeds")

    @property
    def stats(self) -> EmbedStats:
        return EmbedStats()

"""`CachedEmbedder`: an embedder that computes only what the cache does not hold, and counts it."""

from __future__ import annotations

import threading
import time
from typing import Sequence

import msgspec
import numpy as np

from engram.providers.embeddings.base import Embedder
from engram.providers.embeddings.cache import EmbeddingCache, text_key


class EmbedStats(msgspec.Struct):
    calls: int = 0  # embed() calls
    texts_requested: int = 0
    texts_computed: int = 0  # texts the model actually ran on
    cache_hits: int = 0  # distinct texts served from the cache
    model_seconds: float = 0.0  # time spent running the model (the rest of a call is cache work)


class CachedEmbedder:
    def __init__(self, embedder: Embedder, cache: EmbeddingCache):
        self.embedder = embedder
        self.cache = cache
        self.name = embedder.name
        self.dim = embedder.dim
        self.is_fallback = embedder.is_fallback
        self.stats = EmbedStats()
        self._stats_lock = threading.Lock()  # `cached` may run on several threads beside `embed`

    def cached(self, texts: Sequence[str]) -> np.ndarray | None:
        """The vectors of `texts` if the cache holds every one of them (counted as a call served from the
        cache), else None (nothing counted): lets a caller answer a request of known texts at once, without
        queueing it behind model work (`EmbedBatcher`)."""
        keys = [text_key(t) for t in texts]
        distinct = list(dict.fromkeys(keys))
        vectors = self.cache.get_many(self.name, distinct)
        if len(vectors) < len(distinct):
            return None
        with self._stats_lock:
            self.stats.calls += 1
            self.stats.texts_requested += len(texts)
            self.stats.cache_hits += len(distinct)
        return np.stack([vectors[key] for key in keys]).astype(np.float32, copy=False)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._stats_lock:
            self.stats.calls += 1
            self.stats.texts_requested += len(texts)
        keys = [text_key(t) for t in texts]
        first: dict[str, int] = {}
        for row, key in enumerate(keys):
            first.setdefault(key, row)  # a text repeated in one call is computed once
        vectors = self.cache.get_many(self.name, list(first))
        missing = [key for key in first if key not in vectors]
        if missing:
            started = time.perf_counter()
            computed = self.embedder.embed([texts[first[key]] for key in missing])
            seconds = time.perf_counter() - started
            self.cache.put_many(self.name, missing, computed)
            vectors.update(zip(missing, computed))
        with self._stats_lock:
            if missing:
                self.stats.model_seconds += seconds
                self.stats.texts_computed += len(missing)
            self.stats.cache_hits += len(first) - len(missing)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, key in enumerate(keys):
            out[row] = vectors[key]
        return out

    def retain(self, model: str, keys: set[str]) -> int:
        """The cache keeps only these vectors (see `EmbeddingCache.retain`)."""
        return self.cache.retain(model, keys)

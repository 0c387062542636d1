"""An embedder built on first use: a process that never embeds never loads a model or opens a cache."""

from __future__ import annotations

import threading
from typing import Callable, Sequence

import numpy as np

from engram.providers.embeddings.base import Embedder, WrappingEmbedder


class LazyEmbedder(WrappingEmbedder):
    def __init__(self, build: Callable[[], Embedder]):
        self._build = build
        self._embedder: Embedder | None = None
        self._lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            with self._lock:
                if self._embedder is None:
                    self._embedder = self._build()
        return self._embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        """`WrappingEmbedder.embedder` is writable: an embedder given outright is used as is, never built."""
        with self._lock:
            self._embedder = embedder

    @property
    def stats(self):
        """The cache counters (`EmbedStats`) when the embedder is a cached one, else None."""
        return getattr(self.embedder, "stats", None)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.embed(texts)

    def retain(self, model: str, keys: set[str]) -> int:
        retain = getattr(self.embedder, "retain", None)
        return retain(model, keys) if retain is not None else 0

    def close(self) -> None:
        """Close the cache file, if the embedder was ever built (a later use builds it again)."""
        with self._lock:
            cache = getattr(self._embedder, "cache", None)
            if cache is not None:
                cache.close()
            self._embedder = None

"""The Embedder actor: one process that owns the embedding model and its cache file.

A thin Ray shell around `CachedEmbedder` (all logic lives there): other actors send texts in
batches and get float32 vectors back. It is the only writer of `<home>/cache/embeddings.duckdb`.
"""

from __future__ import annotations

import numpy as np
import ray

from engram.config.llm import EmbedderConfig
from engram.embeddings.factory import make_cached_embedder


@ray.remote
class EmbedderActor:
    def __init__(self, home: str, embedder: dict | None = None):
        # Settings travel as their JSON form: plain data crosses process boundaries best.
        self._embedder = make_cached_embedder(home, EmbedderConfig.model_validate(embedder or {}))

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embedder.embed(texts)

    def info(self) -> dict:
        e = self._embedder
        return {"name": e.name, "dim": e.dim, "is_fallback": e.is_fallback}

    def stats(self) -> dict:
        s = self._embedder.stats
        return {"calls": s.calls, "texts_requested": s.texts_requested, "texts_computed": s.texts_computed, "cache_hits": s.cache_hits}

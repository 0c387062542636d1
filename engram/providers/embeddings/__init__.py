"""Sentence embeddings: all-MiniLM-L6-v2 (ONNX, offline) by default, a hashing fallback, and a content-addressed cache.

    from engram.providers.embeddings import make_cached_embedder
    embedder = make_cached_embedder(home)          # <home>/cache/embeddings.duckdb
    vectors = embedder.embed(["text", ...])        # float32 (n, 384), L2-normalised
"""

from engram.providers.embeddings.base import Embedder
from engram.providers.embeddings.cache import EmbeddingCache
from engram.providers.embeddings.cached import CachedEmbedder, EmbedStats
from engram.providers.embeddings.factory import describe_embedder, make_cached_embedder, make_embedder

__all__ = [
    "Embedder",
    "EmbeddingCache",
    "CachedEmbedder",
    "EmbedStats",
    "describe_embedder",
    "make_cached_embedder",
    "make_embedder",
]

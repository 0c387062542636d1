"""What an embedder is: a name (part of every index's metadata), a dimension, and `embed`."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    # Read-only: a wrapping embedder (cached, batched, lazy) answers them with its model's, as properties.
    @property
    def name(self) -> str:
        """The model name; vectors of different names never mix (cache keys and index metadata)."""
        ...

    @property
    def dim(self) -> int: ...

    @property
    def is_fallback(self) -> bool:
        """True for the hashing embedder, which captures word overlap, not meaning."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim), each row L2-normalised (zero rows for empty input)."""
        ...


class WrappingEmbedder:
    """An embedder that wraps another (`self.embedder`) and answers with its model's identity."""

    embedder: Embedder

    @property
    def name(self) -> str:
        return self.embedder.name

    @property
    def dim(self) -> int:
        return self.embedder.dim

    @property
    def is_fallback(self) -> bool:
        return self.embedder.is_fallback


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)

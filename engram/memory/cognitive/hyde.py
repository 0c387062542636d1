"""HyDE (hypothetical document embeddings): search near a memory that would answer the query.

The memory tasks write the hypothetical memory (`MemoryTasks.hyde`); recall searches near the mean of its
embedding and the query's (`engram.memory.cognitive.retrieval`, step 1, as HyDE defines it) with a similarity
threshold that starts at 0.7 and is lowered step by step (0.1) to 0.3 until something clears it
(`rag.hyde` in agent.config.json: initialThreshold, minThreshold, adaptiveThreshold).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from engram.config import defaults as d
from engram.config.agent import Hyde


@dataclass(frozen=True)
class HydeSettings:
    initial: float = d.HYDE_INITIAL_THRESHOLD
    minimum: float = d.HYDE_MIN_THRESHOLD
    step: float = d.HYDE_THRESHOLD_STEP
    adaptive: bool = True

    @classmethod
    def of(cls, hyde: Hyde) -> "HydeSettings":
        """From the `rag.hyde` section of agent.config.json."""
        return cls(initial=hyde.initial_threshold, minimum=hyde.min_threshold, adaptive=hyde.adaptive_threshold)


class NearestIndex(Protocol):
    def search(self, vector: np.ndarray, k: int, allowed: Callable[[str], bool] | None = None) -> list[tuple[str, float]]: ...


@dataclass(frozen=True)
class HydeOutcome:
    text: str  # the hypothetical memory
    threshold: float  # the threshold that produced the hits (the last one tried when none did)
    tried: tuple[float, ...]  # thresholds in the order they were tried
    hits: tuple[tuple[str, float], ...]  # (trace id, cosine to the hypothetical memory), best first


def thresholds(initial: float, minimum: float, step: float = d.HYDE_THRESHOLD_STEP, adaptive: bool = True) -> tuple[float, ...]:
    """initial, initial − step, … down to minimum (just `initial` when not adaptive)."""
    if not adaptive or initial <= minimum:
        return (round(initial, 6),)
    out, t = [], initial
    while t > minimum + 1e-9:
        out.append(round(t, 6))
        t -= step
    out.append(round(minimum, 6))
    return tuple(out)


def adaptive_search(
    index: NearestIndex,
    vector: np.ndarray,
    k: int,
    allowed: Callable[[str], bool] | None,
    initial: float = d.HYDE_INITIAL_THRESHOLD,
    minimum: float = d.HYDE_MIN_THRESHOLD,
    step: float = d.HYDE_THRESHOLD_STEP,
    *,
    adaptive: bool = True,
    text: str = "",
) -> HydeOutcome:
    """Nearest `k` to `vector`, keeping those at or above the first threshold that keeps any."""
    nearest = index.search(vector, k, allowed)
    tried = []
    for t in thresholds(initial, minimum, step, adaptive):
        tried.append(t)
        hits = tuple((tid, cos) for tid, cos in nearest if cos >= t)
        if hits:
            return HydeOutcome(text=text, threshold=t, tried=tuple(tried), hits=hits)
    return HydeOutcome(text=text, threshold=tried[-1], tried=tuple(tried), hits=())

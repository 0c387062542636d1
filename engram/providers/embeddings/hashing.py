"""The dependency-free fallback: feature hashing of words, word pairs and character trigrams.

It needs nothing beyond numpy and the standard library, and it is honest about what it is: its
name says `hashing`, and similarity means shared words, not shared meaning ("cat" and "kitten"
are unrelated to it). It is used only when the real model's packages are missing.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Sequence

import numpy as np

from engram.providers.embeddings.base import l2_normalise

HASHING_DIM = 384  # the same width as all-MiniLM-L6-v2, so indexes can be sized alike
_WORD = re.compile(r"[a-z0-9]+")
# Feature weights: whole words carry most meaning; pairs add order; trigrams tolerate typos and inflection.
WORD_WEIGHT = 1.0
PAIR_WEIGHT = 0.5
TRIGRAM_WEIGHT = 0.25


def _bucket(feature: str, dim: int) -> tuple[int, float]:
    # blake2b, not hash(): Python's string hash changes between processes.
    h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return h % dim, (1.0 if (h >> 63) & 1 else -1.0)


class HashingEmbedder:
    is_fallback = True

    def __init__(self, dim: int = HASHING_DIM):
        self.dim = dim
        self.name = f"hashing-v1-{dim}"

    def _features(self, text: str) -> dict[str, float]:
        words = _WORD.findall(text.lower())
        feats: dict[str, float] = {}
        for w in words:
            feats["w:" + w] = feats.get("w:" + w, 0.0) + WORD_WEIGHT
            padded = f"#{w}#"
            for k in range(len(padded) - 2):
                key = "c:" + padded[k : k + 3]
                feats[key] = feats.get(key, 0.0) + TRIGRAM_WEIGHT
        for a, b in zip(words, words[1:]):
            key = f"p:{a} {b}"
            feats[key] = feats.get(key, 0.0) + PAIR_WEIGHT
        return feats

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text).items():
                index, sign = _bucket(feature, self.dim)
                out[row, index] += sign * (1.0 + math.log(weight)) if weight >= 1 else sign * weight
        return l2_normalise(out)

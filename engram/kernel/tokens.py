"""One token estimate for all of engram, so thresholds mean the same thing everywhere."""

from __future__ import annotations

# Roughly four characters per token for English text with common tokenizers; WilmerAI and
# Wunderland both use such a character heuristic for their thresholds.
CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated token count of `text` (0 for empty text, at least 1 otherwise)."""
    if not text:
        return 0
    return max(1, -(-len(text) // CHARS_PER_TOKEN))

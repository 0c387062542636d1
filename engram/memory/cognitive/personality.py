"""HEXACO personality and PAD mood: what they change in memory.

The Wunderland guide's rules, in one place:
- encoding attention: openness → novelty, conscientiousness → commitments and procedures,
  emotionality → emotional content, agreeableness → preferences, honesty → corrections;
  mood-congruent content is encoded more strongly;
- working memory: 7 slots, +1 for openness > 0.6, −1 for conscientiousness > 0.6, within 5–9;
- auto-ingest ("Personality-Driven Behavior"): openness lowers the importance threshold and adds a
  fact per turn; conscientiousness tracks action items; agreeableness adds 2 retrieval results;
  emotionality and openness store emotional context, emotionality tracks sentiment (mood);
  honesty lowers the deduplication threshold.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.config import defaults as d
from engram.config.agent import Mood, Personality

TRAITS = ("honesty", "emotionality", "extraversion", "agreeableness", "conscientiousness", "openness")


@dataclass(frozen=True)
class Pad:
    """Pleasure (valence), arousal, dominance, each in [-1, 1]."""

    valence: float = 0.0
    arousal: float = 0.0
    dominance: float = 0.0

    @classmethod
    def of(cls, mood: Mood) -> "Pad":
        return cls(float(mood.valence), float(mood.arousal), float(mood.dominance))

    def blend(self, other: "Pad", weight: float) -> "Pad":
        """weight · self + (1 − weight) · other."""
        w = weight
        return Pad(
            w * self.valence + (1 - w) * other.valence,
            w * self.arousal + (1 - w) * other.arousal,
            w * self.dominance + (1 - w) * other.dominance,
        )


NEUTRAL_MOOD = Pad()


def high(personality: Personality, trait: str) -> bool:
    return bool(getattr(personality, trait) > d.HIGH_TRAIT)


def working_memory_capacity(personality: Personality, base: int = d.WORKING_MEMORY_SLOTS) -> int:
    """Baddeley 7±2: +1 for high openness, −1 for high conscientiousness, kept within 5–9."""
    capacity = base + (1 if high(personality, "openness") else 0) - (1 if high(personality, "conscientiousness") else 0)
    return max(d.WORKING_MEMORY_MIN_SLOTS, min(d.WORKING_MEMORY_MAX_SLOTS, capacity))


# What each trait attends to when encoding: fact categories and trace types it finds relevant.
TRAIT_FOCUS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # trait: (categories, trace types)
    "conscientiousness": (frozenset({"action_item", "goal", "lesson"}), frozenset({"procedural", "prospective"})),
    "emotionality": (frozenset({"emotional_context"}), frozenset()),
    "agreeableness": (frozenset({"user_preference"}), frozenset()),
    "honesty": (frozenset({"correction"}), frozenset()),
}


def relevance(trait: str, *, category: str, trace_type: str, intensity: float, novelty: float) -> float:
    """How much of what `trait` attends to this content holds, in [0, 1]."""
    if trait == "openness":
        return max(0.0, min(1.0, novelty))
    if trait == "emotionality" and intensity > 0:
        return max(1.0 if category == "emotional_context" else 0.0, min(1.0, intensity))
    categories, types = TRAIT_FOCUS.get(trait, (frozenset(), frozenset()))
    return 1.0 if category in categories or trace_type in types else 0.0


def attention(
    personality: Personality, *, category: str, trace_type: str, intensity: float = 0.0, novelty: float = 0.0
) -> float:
    """1 + Σ ATTENTION_GAIN · (trait − 0.5) · relevance: above 1 when a strong trait meets what it notices."""
    total = 1.0
    for trait in ("openness", "conscientiousness", "emotionality", "agreeableness", "honesty"):
        r = relevance(trait, category=category, trace_type=trace_type, intensity=intensity, novelty=novelty)
        if r:
            total += d.ATTENTION_GAIN * (getattr(personality, trait) - d.TRAIT_NEUTRAL) * r
    return total


def mood_congruence(mood: Pad, valence: float) -> float:
    """Mood-congruent recall factor in [0, 1]: how far current mood and a memory's valence agree in sign."""
    return max(0.0, mood.valence * valence)


def mood_congruent_encoding(mood: Pad, content_valence: float) -> float:
    """Multiplier >= 1 on encoding strength for content whose valence matches the mood."""
    return 1.0 + d.MOOD_CONGRUENT_ENCODING_GAIN * mood_congruence(mood, content_valence)



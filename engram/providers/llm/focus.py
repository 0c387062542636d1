"""How HEXACO personality shifts what the Observer notices, what auto-ingest keeps, and who wins a conflict.

The rules are the Wunderland guide's tables; both providers use them (the offline heuristic as
weights, the anthropic prompts as focus sentences), so a personality means the same thing either way.
"""

from __future__ import annotations

import msgspec

from engram.config import defaults as d
from engram.config.agent import Personality

# Observer: a high trait multiplies the lexical evidence for its observation type by this much.
OBSERVER_FOCUS_WEIGHT = 1.5
# Observer and auto-ingest: a high trait adds this much importance to what it focuses on.
FOCUS_IMPORTANCE_BOOST = 0.15
# Auto-ingest, high openness: "lower importance threshold, +1 fact per turn".
OPENNESS_THRESHOLD_DROP = 0.1
OPENNESS_EXTRA_FACTS = 1


class Traits(msgspec.Struct, frozen=True):
    """HEXACO traits in [0, 1] as plain data (the config model `Personality` converted)."""

    honesty: float = 0.5
    emotionality: float = 0.5
    extraversion: float = 0.5
    agreeableness: float = 0.5
    conscientiousness: float = 0.5
    openness: float = 0.5

    def high(self, trait: str) -> bool:
        return getattr(self, trait) > d.HIGH_TRAIT


NEUTRAL = Traits()


def traits(personality: Personality | Traits | None) -> Traits:
    if personality is None:
        return NEUTRAL
    if isinstance(personality, Traits):
        return personality
    return Traits(
        honesty=personality.honesty,
        emotionality=personality.emotionality,
        extraversion=personality.extraversion,
        agreeableness=personality.agreeableness,
        conscientiousness=personality.conscientiousness,
        openness=personality.openness,
    )


# Wunderland, Observer table: trait -> (observation type it focuses on, what it notices).
OBSERVER_FOCUS = {
    "emotionality": ("emotional", "emotional shifts and sentiment changes"),
    "conscientiousness": ("commitment", "commitments, deadlines and action items"),
    "openness": ("creative", "creative tangents and exploratory ideas"),
    "agreeableness": ("preference", "user preferences and rapport cues"),
    "honesty": ("correction", "corrections and retractions"),
}


def observation_weights(t: Traits) -> dict[str, float]:
    """Multiplier of the evidence for each observation type under personality `t`."""
    weights = {"factual": 1.0, "emotional": 1.0, "commitment": 1.0, "preference": 1.0, "creative": 1.0, "correction": 1.0}
    for trait, (note_type, _) in OBSERVER_FOCUS.items():
        if t.high(trait):
            weights[note_type] = OBSERVER_FOCUS_WEIGHT
    return weights


def observer_focus_text(t: Traits) -> str:
    """The focus sentence for an Observer prompt ("" for a personality without high traits)."""
    parts = [what for trait, (_, what) in OBSERVER_FOCUS.items() if t.high(trait)]
    return ("Pay particular attention to " + "; ".join(parts) + ".") if parts else ""


class IngestPolicy(msgspec.Struct, frozen=True):
    """Auto-ingest under a personality: which fact categories are kept, boosted, and how many."""

    categories: tuple[str, ...]
    boosted: tuple[str, ...]
    importance_threshold: float
    max_per_turn: int


# Stored for every personality; action items and emotional context need the traits that track them.
BASE_CATEGORIES = ("user_preference", "episodic", "goal", "knowledge", "correction")


def ingest_policy(
    t: Traits,
    importance_threshold: float = d.AUTO_INGEST_IMPORTANCE,
    max_per_turn: int = d.AUTO_INGEST_MAX_PER_TURN,
) -> IngestPolicy:
    """Wunderland, "Personality-Driven Behavior" of the auto-ingest pipeline."""
    categories = list(BASE_CATEGORIES)
    boosted: list[str] = []
    if t.high("openness"):
        importance_threshold -= OPENNESS_THRESHOLD_DROP
        max_per_turn += OPENNESS_EXTRA_FACTS
        categories.append("emotional_context")
    if t.high("conscientiousness"):
        categories.append("action_item")
        boosted.append("goal")
    if t.high("agreeableness"):
        boosted.append("user_preference")
    if t.high("emotionality"):
        categories.append("emotional_context")
        boosted.append("episodic")
    if t.high("honesty"):
        boosted.append("correction")
    return IngestPolicy(
        categories=tuple(dict.fromkeys(categories)),
        boosted=tuple(dict.fromkeys(boosted)),
        importance_threshold=max(0.0, round(importance_threshold, 6)),
        max_per_turn=max_per_turn,
    )


def ingest_focus_text(policy: IngestPolicy) -> str:
    text = "Use only these categories: " + ", ".join(policy.categories) + "."
    if policy.boosted:
        text += " Rate these as more important than usual: " + ", ".join(policy.boosted) + "."
    return text


def conflict_resolution(t: Traits) -> str:
    """Wunderland, Reflector: honesty prefers newer, agreeableness keeps both, default prefers confidence."""
    if t.high("honesty"):
        return "prefer_newer"
    if t.high("agreeableness"):
        return "keep_both"
    return "prefer_confidence"


def resolve(
    t: Traits, older: str, newer: str, older_confidence: float, newer_confidence: float
) -> tuple[str, str, str | None]:
    """(resolution, winner, loser) for a contradiction between ids `older` and `newer`.

    Equal confidence goes to the newer memory: it is the latest thing the user said.
    """
    how = conflict_resolution(t)
    if how == "keep_both":
        return how, newer, None
    if how == "prefer_confidence" and older_confidence > newer_confidence:
        return how, older, newer
    return how, newer, older

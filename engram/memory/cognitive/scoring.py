"""The six-factor composite retrieval score.

    score = w_strength · strength + w_similarity · similarity + w_recency · recency
          + w_emotional · emotional congruence + w_activation · graph activation + w_importance · importance

Each factor is in [0, 1] (see `engram.config.defaults` for each formula). Weights come from the
agent's configuration (`memory.retrieval.weights`) and a call may override any of them; the
override holds for the whole retrieval, re-scoring included.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Mapping

from engram.config import defaults as d
from engram.memory.cognitive.decay import recency, strength_at
from engram.memory.cognitive.model import MemoryTrace, US_PER_S
from engram.memory.cognitive.personality import Pad, mood_congruence

FACTORS = ("strength", "similarity", "recency", "emotional", "activation", "importance")


@dataclass(frozen=True)
class Factors:
    """One value per factor; used for the raw factors, the weights, and the weighted contributions."""

    strength: float = 0.0
    similarity: float = 0.0
    recency: float = 0.0
    emotional: float = 0.0
    activation: float = 0.0
    importance: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def times(self, other: "Factors") -> "Factors":
        return Factors(**{f: getattr(self, f) * getattr(other, f) for f in FACTORS})

    def total(self) -> float:
        return float(sum(getattr(self, f) for f in FACTORS))


DEFAULT_WEIGHTS = Factors(
    strength=d.RETRIEVAL_WEIGHT_STRENGTH,
    similarity=d.RETRIEVAL_WEIGHT_SIMILARITY,
    recency=d.RETRIEVAL_WEIGHT_RECENCY,
    emotional=d.RETRIEVAL_WEIGHT_EMOTIONAL,
    activation=d.RETRIEVAL_WEIGHT_ACTIVATION,
    importance=d.RETRIEVAL_WEIGHT_IMPORTANCE,
)

# The user-facing names (agent.config.json, --weight) of each factor.
ALIASES = {
    "strength": "strength",
    "similarity": "similarity",
    "recency": "recency",
    "emotional": "emotional",
    "emotionalCongruence": "emotional",
    "emotional_congruence": "emotional",
    "activation": "activation",
    "graphActivation": "activation",
    "graph_activation": "activation",
    "importance": "importance",
}


def weights_with(base: Factors, overrides: Mapping[str, float] | None) -> Factors:
    """`base` with the per-call `overrides` (any factor name or alias) applied."""
    if not overrides:
        return base
    changes = {}
    for name, value in overrides.items():
        key = ALIASES.get(name)
        if key is None:
            raise ValueError(f"unknown retrieval factor {name!r}; factors: {', '.join(FACTORS)}")
        if value < 0:
            raise ValueError(f"retrieval weight {name} must be >= 0, got {value}")
        changes[key] = float(value)
    return replace(base, **changes)


def factors(
    trace: MemoryTrace,
    *,
    similarity: float,
    activation: float,
    mood: Pad,
    now_us: int,
    half_life_hours: float = d.RECENCY_HALF_LIFE_HOURS,
) -> Factors:
    """The six factors of `trace` for one query at event time `now_us`."""
    return Factors(
        strength=min(1.0, strength_at(trace, now_us)),
        similarity=max(0.0, min(1.0, similarity)),
        recency=recency((now_us - trace.encoded_us) / US_PER_S, half_life_hours),
        emotional=mood_congruence(mood, trace.valence),
        activation=max(0.0, min(1.0, activation)),
        importance=max(0.0, min(1.0, trace.importance)),
    )


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Factors))

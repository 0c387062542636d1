"""Who wins a contradiction, by personality (Wunderland, Reflector):

    honesty > 0.6         prefer the newer information
    agreeableness > 0.6   keep both versions, and record the discrepancy
    otherwise             the higher confidence wins (a tie goes to the newer)

Honesty is checked first. The rule itself lives in `engram.providers.llm.focus` (the memory tasks apply the
same one in their prompts and heuristics); the Reflector and the Consolidator apply it again to what
they record, so a model that resolved otherwise cannot change the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.config.agent import Personality


@dataclass(frozen=True)
class Side:
    id: str
    ts_us: int
    confidence: float
    order: tuple[object, ...] = ()  # which is newer at one instant (`engram.memory.background.schedule.time_order`); else by id


@dataclass(frozen=True)
class Resolution:
    how: str  # prefer_newer | keep_both | prefer_confidence
    winner: str
    loser: str | None  # None: both kept


def resolve(personality: Personality, a: Side, b: Side) -> Resolution:
    """Resolve a contradiction between `a` and `b` (either order) for an agent with `personality`."""
    from engram.providers.llm.focus import resolve as rule, traits

    older, newer = sorted((a, b), key=lambda s: (s.ts_us, s.order, s.id) if a.order and b.order else (s.ts_us, s.id))
    how, winner, loser = rule(traits(personality), older.id, newer.id, older.confidence, newer.confidence)
    return Resolution(how, winner, loser)

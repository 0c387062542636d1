"""Offline auto-ingest: categorised facts from one turn, from lexical cues.

The personality decides which categories exist at all (Wunderland: action items need
conscientiousness; emotional context needs openness or emotionality) and which are boosted.
"""

from __future__ import annotations

import re
from typing import Sequence

from engram.providers.llm.focus import FOCUS_IMPORTANCE_BOOST, Traits, ingest_policy
from engram.providers.llm.offline import cues, tuning as k
from engram.providers.llm.offline.analysis import Unit, analyse
from engram.providers.llm.offline.summarize import render_unit
from engram.providers.llm.offline.text import clip_words
from engram.providers.llm.types import ChatLine, FACT_CATEGORIES, Fact

# An emotion this intense is emotional context even without a feeling word.
_EMOTIONAL_INTENSITY = 0.5
# Facts are observation-sized.
_MAX_FACT_CHARS = k.MAX_NOTE_CHARS
# A first-person statement with no cue still tells what is going on with the speaker: an episode.
_SITUATION_EVIDENCE = 0.5
_SITUATION_MIN_WORDS = 3
# ...and so does any other statement with this many content words: what the speaker holds true, or observes.
_STATEMENT_MIN_WORDS = 4
# ...but a cue-less statement is worth storing only with something concrete in it (a name, a time, a number, a feeling,
# or the speaker's own: what they have and who is in their life — "my husband and kids", "our friendship", "I've got
# lots of kids' books": self-disclosure is what a memory of a person is made of).
_SITUATION_IMPORTANCE_PENALTY = 0.1
_SELF_DISCLOSURE = re.compile(
    r"\b(?:my|our)\s+(?!(?:pleasure|bad|god|gosh|goodness|word)\b)[a-z]|\b(?:I|we)\s*(?:have|['’]ve got|own)\b",
    re.IGNORECASE,
)


def category_evidence(u: Unit) -> dict[str, float]:
    names = sum(1 for e in u.entities if e.kind in ("person", "place", "name"))
    emotional = float(u.cue["emotion_words"]) + (1.0 if u.pad.hits and u.pad.intensity >= _EMOTIONAL_INTENSITY else 0.0)
    # Knowledge: general statements, or statements about named things with numbers or dates.
    knowledge = float(u.cue["knowledge"]) + (0.5 if names and (u.has_number or u.refers_to) else 0.0)
    return {
        # A constraint (allergy, diet, deadline) is a standing preference of the strongest kind.
        "user_preference": float(u.cue["preference"]) + 1.5 * u.cue["constraint"],
        "episodic": float(u.cue["episodic"]),
        "goal": float(u.cue["goal"]),
        "knowledge": knowledge,
        "correction": 1.5 * u.cue["correction"],  # a correction outranks whatever it corrects
        "action_item": float(u.cue["action_item"]),
        "emotional_context": emotional,
    }


def fact_importance(u: Unit, category: str, boosted: tuple[str, ...]) -> float:
    names = sum(1 for e in u.entities if e.kind in ("person", "place", "name"))
    value = (
        k.FACT_BASE_IMPORTANCE[category]
        + k.ENTITY_IMPORTANCE * min(names, 3)
        + (k.TIME_IMPORTANCE if u.refers_to else 0.0)
        + (k.NUMBER_IMPORTANCE if u.has_number else 0.0)
        + k.INTENSITY_IMPORTANCE * (u.pad.intensity if u.pad.hits else 0.0)
        + (FOCUS_IMPORTANCE_BOOST if category in boosted else 0.0)
    )
    return round(min(1.0, max(0.0, value)), 3)


def extract_facts(
    lines: Sequence[ChatLine], traits: Traits, importance_threshold: float, max_per_turn: int
) -> tuple[Fact, ...]:
    policy = ingest_policy(traits)  # categories and boosts; threshold and limit come from the caller
    allowed = [c for c in FACT_CATEGORIES if c in policy.categories]
    found: list[tuple[float, int, Fact]] = []
    seen: set[str] = set()
    for u in analyse(lines):
        if u.chitchat or u.question:
            continue
        ev = category_evidence(u)
        best, score = "", 0.0
        for c in allowed:  # fixed order: ties go to the earlier category
            if ev[c] > score:
                best, score = c, ev[c]
        if not best and len(u.stems) >= _SITUATION_MIN_WORDS and (
            cues.FIRST_PERSON.search(u.text) or len(u.stems) >= _STATEMENT_MIN_WORDS
        ):
            best, score = "episodic", _SITUATION_EVIDENCE
        if not best:
            continue
        content = clip_words(render_unit(u), _MAX_FACT_CHARS)
        if content in seen:
            continue
        seen.add(content)
        importance = fact_importance(u, best, policy.boosted)
        if score == _SITUATION_EVIDENCE and not any(ev.values()) and not _SELF_DISCLOSURE.search(u.text):
            importance = round(max(0.0, importance - _SITUATION_IMPORTANCE_PENALTY), 3)
        fact = Fact(
            category=best,
            content=content,
            importance=importance,
            source_seq=u.seq,
            entities=tuple(u.entity_texts()),
            message_id=u.message_id,
        )
        if fact.importance >= importance_threshold:
            found.append((fact.importance, u.index, fact))
    found.sort(key=lambda f: (-f[0], f[1]))
    return tuple(f for _, _, f in found[:max_per_turn])

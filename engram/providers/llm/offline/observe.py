"""The offline Observer: typed observation notes from lexical cues, within a compression budget.

Each informative sentence gets evidence for every note type (cue words, emotion, entities); the
personality multiplies the evidence for the types it focuses on; the strongest type wins. Notes
are then chosen by importance until they fill OBSERVATION_TOKEN_SHARE of the observed tokens,
which is what keeps the guide's 5–40x compression.
"""

from __future__ import annotations

from typing import Sequence

from engram.events.background import ObservationNote
from engram.kernel.tokens import estimate_tokens
from engram.providers.llm.focus import FOCUS_IMPORTANCE_BOOST, OBSERVER_FOCUS, Traits, observation_weights
from engram.providers.llm.hashing import note_id
from engram.providers.llm.offline import cues, tuning as k
from engram.providers.llm.offline.analysis import Unit, analyse
from engram.providers.llm.offline.summarize import render_unit
from engram.providers.llm.offline.text import clip_words
from engram.providers.llm.types import ChatLine, OBSERVATION_TYPES

# Evidence weights: how much one cue or feature counts towards a type.
_FACT_BASE = 0.3  # an informative sentence is a factual note unless something says otherwise
_FACT_PER_NAME = 0.15
_FACT_NUMBER = 0.15
_FACT_TIME = 0.2
_FACT_EVENT = 0.2
_EMOTION_WORD = 0.3
# Creative vocabulary ("art", "story") is common in chat, so one creative word counts for less.
_CREATIVE_WORD = 0.5
# Praise of someone else ("your store looks great!") is the speaker being kind, not feeling much:
# emotion without a first-person word or a feeling word counts half.
_OTHERS_EMOTION = 0.5


def evidence(u: Unit) -> dict[str, float]:
    names = sum(1 for e in u.entities if e.kind in ("person", "place", "name"))
    emotional = (u.pad.intensity if u.pad.hits else 0.0) + _EMOTION_WORD * u.cue["emotion_words"]
    if not u.cue["emotion_words"] and not cues.FIRST_PERSON.search(u.text):
        emotional *= _OTHERS_EMOTION
    factual = (
        _FACT_BASE
        + _FACT_PER_NAME * min(names, 2)
        + (_FACT_NUMBER if u.has_number else 0.0)
        + (_FACT_TIME if u.refers_to else 0.0)
        + (_FACT_EVENT if u.cue["episodic"] else 0.0)
    )
    return {
        "factual": factual,
        "emotional": emotional,
        "commitment": float(u.cue["commitment"]),
        "preference": float(u.cue["preference"]),
        "creative": _CREATIVE_WORD * u.cue["creative"],
        "correction": float(u.cue["correction"]),
    }


def note_type(u: Unit, weights: dict[str, float]) -> tuple[str, float]:
    ev = evidence(u)
    best, score = "factual", -1.0
    for t in OBSERVATION_TYPES:  # fixed order: ties go to the earlier type
        s = ev[t] * weights[t]
        if s > score:
            best, score = t, s
    return best, score


def importance(u: Unit, kind: str, focused: set[str]) -> float:
    names = sum(1 for e in u.entities if e.kind in ("person", "place", "name"))
    value = (
        k.NOTE_BASE_IMPORTANCE[kind]
        + k.ENTITY_IMPORTANCE * min(names, 3)
        + (k.TIME_IMPORTANCE if u.refers_to else 0.0)
        + (k.NUMBER_IMPORTANCE if u.has_number else 0.0)
        + k.INTENSITY_IMPORTANCE * (u.pad.intensity if u.pad.hits else 0.0)
        + (FOCUS_IMPORTANCE_BOOST if kind in focused else 0.0)
    )
    return round(min(1.0, max(0.0, value)), 3)


def observe(lines: Sequence[ChatLine], traits: Traits) -> tuple[ObservationNote, ...]:
    units = analyse(lines)
    weights = observation_weights(traits)
    focused = {t for trait, (t, _) in OBSERVER_FOCUS.items() if traits.high(trait)}
    candidates: list[tuple[float, int, ObservationNote]] = []
    for u in units:
        # Questions ask rather than tell, unless they propose ("what if we...") or promise.
        if u.chitchat or (u.question and not (u.cue["commitment"] or u.cue["correction"] or u.cue["creative"])):
            continue
        kind, score = note_type(u, weights)
        if score < k.MIN_NOTE_EVIDENCE:
            continue
        text = clip_words(render_unit(u), k.MAX_NOTE_CHARS)
        note = ObservationNote(
            note_id=note_id((u.seq,), kind, text),
            type=kind,
            text=text,
            importance=importance(u, kind, focused),
            observed_us=u.ts_us,
            entities=tuple(u.entity_texts()),
            refers_to=u.refers_to,
            source_seqs=(u.seq,),
            confidence=k.OFFLINE_CONFIDENCE,
        )
        candidates.append((note.importance, u.index, note))
    observed = sum(estimate_tokens(line.content) for line in lines)
    budget = max(k.MIN_OBSERVATION_TOKENS, int(observed * k.OBSERVATION_TOKEN_SHARE))
    chosen: list[tuple[int, ObservationNote]] = []
    used = 0
    for imp, index, note in sorted(candidates, key=lambda c: (-c[0], c[1])):
        cost = estimate_tokens(note.text)
        if used + cost > budget:
            continue
        chosen.append((index, note))
        used += cost
    chosen.sort(key=lambda c: c[0])
    return tuple(note for _, note in chosen)

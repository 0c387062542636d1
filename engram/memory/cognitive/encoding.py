"""Encoding a new memory: its strength, stability, review interval and emotional context.

    strength  = min(1, 0.5 · attention · mood_congruence · (2 if flashbulb))
    stability = 1 h · (5 if flashbulb)
    interval  = 1 h (the first spaced-repetition review is due one hour after encoding)

A flashbulb memory is one whose emotional intensity exceeds 0.8. Personality shapes attention
(what a trait notices is encoded more strongly) and a mood that matches the content's valence
strengthens it; both multiply the same base, so a flashbulb memory has exactly twice the
strength (up to 1: a strength is a proportion, in [0, 1]) and five times the stability an ordinary
one would have. Constants: `engram.config.defaults`.

Every producer of traces (auto-ingest, tool-failure lessons, the Reflector, schemas) calls `encode`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from engram.config import defaults as d
from engram.config.agent import AgentConfig, Personality
from engram.events.cognitive import TraceEncoded
from engram.events.provenance import LlmCall
from engram.memory.cognitive.model import SCOPES, SOURCE_TYPES, TRACE_TYPES
from engram.memory.cognitive.personality import NEUTRAL_MOOD, Pad, attention, mood_congruent_encoding


@dataclass(frozen=True)
class Emotion:
    """The emotional reading of a content: PAD in [-1, 1] and intensity in [0, 1]."""

    valence: float = 0.0
    arousal: float = 0.0
    dominance: float = 0.0
    intensity: float = 0.0

    @property
    def pad(self) -> Pad:
        return Pad(self.valence, self.arousal, self.dominance)


NO_EMOTION = Emotion()


@dataclass(frozen=True)
class Encoding:
    strength: float
    stability_s: float
    interval_s: float
    valence: float
    arousal: float
    dominance: float
    intensity: float
    flashbulb: bool
    attention: float
    mood_congruence: float


def encoding_state(
    *,
    personality: Personality,
    mood: Pad = NEUTRAL_MOOD,
    emotion: Emotion = NO_EMOTION,
    category: str = "",
    trace_type: str = "episodic",
    novelty: float = 0.0,
    flashbulb_threshold: float = d.FLASHBULB_THRESHOLD,
) -> Encoding:
    """The initial decay state and emotional context of a trace (see the module docstring)."""
    flashbulb = emotion.intensity > flashbulb_threshold
    att = attention(personality, category=category, trace_type=trace_type, intensity=emotion.intensity, novelty=novelty)
    congruence = mood_congruent_encoding(mood, emotion.valence)
    strength = d.BASE_ENCODING_STRENGTH * att * congruence
    stability = d.INITIAL_STABILITY_S
    if flashbulb:
        strength *= d.FLASHBULB_STRENGTH_MULTIPLIER
        stability *= d.FLASHBULB_STABILITY_MULTIPLIER
    strength = min(d.REINFORCED_STRENGTH_CAP, strength)
    snapshot = emotion.pad.blend(mood, d.CONTENT_EMOTION_WEIGHT)
    return Encoding(
        strength=strength,
        stability_s=stability,
        interval_s=d.INITIAL_REINFORCEMENT_INTERVAL_S,
        valence=round(snapshot.valence, 6),
        arousal=round(snapshot.arousal, 6),
        dominance=round(snapshot.dominance, 6),
        intensity=round(emotion.intensity, 6),
        flashbulb=flashbulb,
        attention=att,
        mood_congruence=congruence,
    )


def trace_id(*parts: object) -> str:
    """A deterministic trace id from what identifies the memory (so a re-run encodes the same id)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
    return f"t-{digest[:20]}"


def encode(
    *,
    trace_id: str,
    content: str,
    config: AgentConfig,
    mood: Pad = NEUTRAL_MOOD,
    scope: str,
    scope_id: str,
    source_type: str,
    source_seqs: tuple[int, ...] = (),
    source_message_ids: tuple[str, ...] = (),
    trace_type: str = "episodic",
    category: str = "",
    importance: float = 0.5,
    confidence: float = 0.7,
    entities: tuple[str, ...] = (),
    tags: tuple[str, ...] = (),
    emotion: Emotion = NO_EMOTION,
    novelty: float = 0.0,
    llm: LlmCall | None = None,
    context: str = "",
    context_message_ids: tuple[str, ...] = (),
) -> TraceEncoded:
    """The `TraceEncoded` event of a new memory for an agent with `config` in `mood`."""
    if trace_type not in TRACE_TYPES:
        raise ValueError(f"trace type {trace_type!r} is not one of {TRACE_TYPES}")
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is not one of {SCOPES}")
    if source_type not in SOURCE_TYPES:
        raise ValueError(f"source type {source_type!r} is not one of {SOURCE_TYPES}")
    enc = encoding_state(
        personality=config.personality,
        mood=mood,
        emotion=emotion,
        category=category,
        trace_type=trace_type,
        novelty=novelty,
        flashbulb_threshold=config.memory.encoding.flashbulb_threshold,
    )
    return TraceEncoded(
        trace_id=trace_id,
        content=content,
        trace_type=trace_type,
        scope=scope,
        scope_id=scope_id,
        source_type=source_type,
        source_seqs=tuple(source_seqs),
        importance=round(min(1.0, max(0.0, importance)), 6),
        confidence=round(min(1.0, max(0.0, confidence)), 6),
        strength=enc.strength,
        stability_s=enc.stability_s,
        interval_s=enc.interval_s,
        entities=tuple(entities),
        tags=tuple(tags),
        category=category,
        source_message_ids=tuple(source_message_ids),
        valence=enc.valence,
        arousal=enc.arousal,
        dominance=enc.dominance,
        intensity=enc.intensity,
        flashbulb=enc.flashbulb,
        llm=llm,
        context=context,
        context_message_ids=tuple(context_message_ids) if context else (),
    )

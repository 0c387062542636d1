"""Encoding: base strength, stability, flashbulb memories, personality and mood modulation."""

from __future__ import annotations

import pytest

from engram.config.agent import AgentConfig, Personality
from engram.memory.cognitive.encoding import Emotion, encode, encoding_state
from engram.memory.cognitive.personality import Pad

NEUTRAL = Personality()


def test_an_ordinary_memory_starts_at_strength_half_and_one_hour_of_stability():
    enc = encoding_state(personality=NEUTRAL)
    assert enc.strength == 0.5
    assert enc.stability_s == 3_600.0
    assert enc.interval_s == 3_600.0
    assert not enc.flashbulb


def test_flashbulb_memory_gets_exactly_twice_the_strength_and_five_times_the_stability():
    ordinary = encoding_state(personality=NEUTRAL, emotion=Emotion(valence=0.9, arousal=0.9, intensity=0.8))
    flashbulb = encoding_state(personality=NEUTRAL, emotion=Emotion(valence=0.9, arousal=0.9, intensity=0.81))
    assert not ordinary.flashbulb and flashbulb.flashbulb
    assert flashbulb.strength == 2 * ordinary.strength
    assert flashbulb.stability_s == 5 * ordinary.stability_s == 5 * 3_600.0


def test_flashbulb_ratios_hold_under_personality_and_mood():
    p = Personality(emotionality=0.9, openness=0.8)
    mood = Pad(0.7, 0.2, 0.0)
    kw = dict(personality=p, mood=mood, category="emotional_context", novelty=0.6)
    a = encoding_state(emotion=Emotion(valence=0.8, arousal=0.9, intensity=0.79), **kw)
    b = encoding_state(emotion=Emotion(valence=0.8, arousal=0.9, intensity=0.79), flashbulb_threshold=0.7, **kw)
    assert b.flashbulb and not a.flashbulb
    assert b.strength == pytest.approx(min(1.0, 2 * a.strength), rel=1e-12)  # twice, up to 1
    assert b.stability_s == 5 * a.stability_s


def test_intensity_must_exceed_the_flashbulb_threshold():
    assert not encoding_state(personality=NEUTRAL, emotion=Emotion(intensity=0.8)).flashbulb
    assert encoding_state(personality=NEUTRAL, emotion=Emotion(intensity=0.8001)).flashbulb


def test_mood_congruent_content_is_encoded_more_strongly():
    happy = Pad(0.8, 0.0, 0.0)
    joyful_content = Emotion(valence=0.9, intensity=0.5)
    sad_content = Emotion(valence=-0.9, intensity=0.5)
    congruent = encoding_state(personality=NEUTRAL, mood=happy, emotion=joyful_content)
    incongruent = encoding_state(personality=NEUTRAL, mood=happy, emotion=sad_content)
    assert congruent.strength == pytest.approx(0.5 * (1 + 0.3 * 0.8 * 0.9))
    assert incongruent.strength == 0.5


@pytest.mark.parametrize(
    "trait,category,trace_type",
    [
        ("conscientiousness", "action_item", "prospective"),
        ("conscientiousness", "", "procedural"),
        ("agreeableness", "user_preference", "semantic"),
        ("honesty", "correction", "semantic"),
        ("emotionality", "emotional_context", "episodic"),
    ],
)
def test_a_strong_trait_attends_to_what_it_notices(trait, category, trace_type):
    high = Personality(**{trait: 1.0})
    low = Personality(**{trait: 0.0})
    kw = dict(category=category, trace_type=trace_type, emotion=Emotion(intensity=0.5 if trait == "emotionality" else 0.0))
    assert encoding_state(personality=high, **kw).strength > 0.5 > encoding_state(personality=low, **kw).strength
    # ... and not to what it does not.
    assert encoding_state(personality=high, category="knowledge", trace_type="semantic").strength == 0.5


def test_openness_strengthens_novel_content():
    curious = Personality(openness=1.0)
    novel = encoding_state(personality=curious, novelty=1.0)
    familiar = encoding_state(personality=curious, novelty=0.0)
    assert novel.strength == pytest.approx(0.5 * (1 + 0.4 * 0.5))
    assert familiar.strength == 0.5


def test_the_pad_snapshot_blends_content_and_mood():
    enc = encoding_state(personality=NEUTRAL, mood=Pad(1.0, 0.0, -1.0), emotion=Emotion(valence=0.0, arousal=1.0, dominance=1.0))
    assert (enc.valence, enc.arousal, enc.dominance) == (pytest.approx(0.3), pytest.approx(0.7), pytest.approx(0.4))


def test_encode_builds_the_event_and_refuses_unknown_vocabulary():
    cfg = AgentConfig()
    ev = encode(
        trace_id="t-1", content="Priya prefers TypeScript", config=cfg, scope="agent", scope_id="a",
        source_type="user_statement", source_seqs=(7,), source_message_ids=("D1:3",), trace_type="semantic",
        category="user_preference", importance=0.6,
    )
    assert (ev.strength, ev.stability_s, ev.interval_s, ev.source_message_ids) == (0.5, 3_600.0, 3_600.0, ("D1:3",))
    with pytest.raises(ValueError):
        encode(trace_id="x", content="c", config=cfg, scope="team", scope_id="a", source_type="user_statement")
    with pytest.raises(ValueError):
        encode(trace_id="x", content="c", config=cfg, scope="agent", scope_id="a", source_type="rumour")


def test_strength_stays_within_zero_and_one_even_for_an_attentive_flashbulb_memory():
    """Issue 12, finding 6: flashbulb strength could exceed 1.0 (0.5 · attention > 1 · 2)."""
    attentive = Personality(openness=1.0, conscientiousness=1.0, extraversion=1.0, agreeableness=1.0,
                            emotionality=1.0, honesty=1.0)
    enc = encoding_state(personality=attentive, mood=Pad(1.0, 1.0, 1.0), category="emotional_context",
                         emotion=Emotion(valence=1.0, arousal=1.0, intensity=1.0), novelty=1.0)
    assert enc.flashbulb and 0.0 < enc.strength <= 1.0


def test_a_death_in_the_family_is_as_intense_as_a_promotion():
    """Issue 12, finding 6: "my dog died... worst day of my life" scored 0.6, "promoted... ecstatic" 1.0."""
    from engram.memory.cognitive.llm_bridge import emotion

    grief = emotion("My dog died yesterday. It was the worst day of my life.")
    joy = emotion("I got promoted today, I am ecstatic!")
    assert grief.valence < 0 < joy.valence
    assert abs(grief.intensity - joy.intensity) < 0.1 and grief.intensity > 0.8  # both flashbulb memories
    assert emotion("My mom passed away last week.").intensity > 0.8

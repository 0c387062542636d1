"""Auto-ingest rules: threshold, per-turn limit, deduplication (applied), HEXACO; tool-failure patterns."""

from __future__ import annotations

import numpy as np
import pytest
from tests.memory.cognitive.helpers import unit

from engram.config.agent import AgentConfig
from engram.memory.cognitive import tool_failures
from engram.memory.cognitive.ingest import Candidate, ingest_rules, select


def cfg(**traits) -> AgentConfig:
    return AgentConfig.model_validate({"personality": traits})


def test_the_guides_numbers_are_the_defaults():
    r = ingest_rules(cfg())
    assert (r.importance_threshold, r.max_per_turn, r.dedup_threshold) == (0.4, 3, 0.85)
    assert r.extra_results == 0 and not r.sentiment_tracking
    assert "action_item" not in r.categories and "emotional_context" not in r.categories


def test_hexaco_adjusts_auto_ingest_as_the_guides_table_says():
    o = ingest_rules(cfg(openness=0.7))
    assert o.importance_threshold == pytest.approx(0.3) and o.max_per_turn == 4 and "emotional_context" in o.categories
    c = ingest_rules(cfg(conscientiousness=0.7))
    assert "action_item" in c.categories and "goal" in c.boosted
    a = ingest_rules(cfg(agreeableness=0.7))
    assert "user_preference" in a.boosted and a.extra_results == 2
    e = ingest_rules(cfg(emotionality=0.7))
    assert e.sentiment_tracking and "emotional_context" in e.categories and "episodic" in e.boosted
    h = ingest_rules(cfg(honesty=0.7))
    assert "correction" in h.boosted and h.dedup_threshold == pytest.approx(0.80)


def _facts(*specs):
    facts = [Candidate(category=c, content=f"fact {i}", importance=imp) for i, (c, imp, _) in enumerate(specs)]
    vectors = np.stack([v for _, _, v in specs])
    return facts, vectors


def test_only_facts_of_importance_four_tenths_or_more_are_kept_at_most_three_per_turn():
    facts, vectors = _facts(
        ("knowledge", 0.9, unit(1)), ("knowledge", 0.39, unit(0, 1)), ("goal", 0.4, unit(0, 0, 1)),
        ("episodic", 0.8, unit(0, 0, 0, 1)), ("knowledge", 0.7, unit(0, 0, 0, 0, 1)),
    )
    s = select(facts, vectors, ingest_rules(cfg()), lambda v: [])
    assert [k.fact.importance for k in s.kept] == [0.9, 0.8, 0.7]  # most important first
    reasons = {f.importance: f.reason for f in s.skipped}
    assert reasons == {0.39: "below_threshold", 0.4: "over_limit"}


def test_a_near_duplicate_of_an_existing_trace_is_skipped_and_named():
    facts, vectors = _facts(("knowledge", 0.9, unit(1, 0.1)), ("knowledge", 0.8, unit(0, 1)))
    existing = {"old": unit(1, 0)}

    def nearest(v):
        return sorted(((tid, float(e @ v)) for tid, e in existing.items()), key=lambda x: -x[1])

    s = select(facts, vectors, ingest_rules(cfg()), nearest)
    assert [k.fact.content for k in s.kept] == ["fact 1"]
    dup = s.skipped[0]
    assert dup.reason == "duplicate" and dup.duplicate_of == "old" and dup.similarity >= 0.85


def test_duplicates_within_one_turn_are_skipped_too():
    facts, vectors = _facts(("knowledge", 0.9, unit(1, 0)), ("knowledge", 0.8, unit(1, 0.05)))
    s = select(facts, vectors, ingest_rules(cfg()), lambda v: [])
    assert len(s.kept) == 1 and s.skipped[0].reason == "duplicate"


def test_dedup_threshold_is_applied_at_exactly_its_value():
    v = unit(1, 0)
    w = unit(0.85, np.sqrt(1 - 0.85**2))  # cosine 0.85 with v
    facts, vectors = _facts(("knowledge", 0.9, w))
    s = select(facts, vectors, ingest_rules(cfg()), lambda q: [("old", float(v @ q))])
    assert s.skipped and s.skipped[0].reason == "duplicate"
    honest = ingest_rules(cfg(honesty=0.7))
    u = unit(0.82, np.sqrt(1 - 0.82**2))  # 0.82: a duplicate only for an honest agent (0.80)
    facts, vectors = _facts(("knowledge", 0.9, u))
    assert select(facts, vectors, ingest_rules(cfg()), lambda q: [("old", float(v @ q))]).kept
    assert not select(facts, vectors, honest, lambda q: [("old", float(v @ q))]).kept


def test_categories_a_personality_does_not_store_are_skipped():
    facts, vectors = _facts(("action_item", 0.9, unit(1)))
    assert select(facts, vectors, ingest_rules(cfg()), lambda v: []).skipped[0].reason == "category"
    assert select(facts, vectors, ingest_rules(cfg(conscientiousness=0.8)), lambda v: []).kept


@pytest.mark.parametrize(
    "error,pattern",
    [
        ("Blocked: Cloudflare challenge page, please complete the CAPTCHA", "anti_bot"),
        ("HTTP 403 Forbidden", "anti_bot"),
        ("Page returned empty content", "empty_content"),
        ("OPENAI_API_KEY is missing", "api_key_missing"),
        ("Request timed out after 30s", "timeout"),
        ("429 Too Many Requests", "rate_limit"),
        ("model 'llama3' not found, try pulling it first", "ollama_model_missing"),
    ],
)
def test_tool_failures_match_the_six_patterns(error, pattern):
    lesson = tool_failures.match("browse", error)
    assert lesson is not None and lesson.pattern == pattern and "browse" in lesson.text


def test_the_lessons_say_what_the_guide_says():
    assert "web_search or stealth_navigate" in tool_failures.match("browse", "captcha").text
    assert "headless browsers" in tool_failures.match("browse", "empty page").text
    assert "wait" in tool_failures.match("llm", "rate limit").text.lower()
    assert tool_failures.match("browse", "the weather is nice") is None
    assert len(tool_failures.PATTERNS) == 6

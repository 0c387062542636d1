"""Tolerant JSON parsing of answers, and what calls cost."""

from __future__ import annotations

import pytest

from engram.config.llm import ModelPrice
from engram.providers.llm.jsonparse import AnswerNotJson, parse_json
from engram.providers.llm.pricing import cost_usd


@pytest.mark.parametrize(
    "answer",
    [
        '{"a": 1}',
        'Here it is:\n```json\n{"a": 1}\n```',
        '```\n{"a": 1}\n```',
        'The notes are {"a": 1} as asked.',
    ],
)
def test_json_is_found_in_a_fence_or_as_the_outermost_object(answer):
    assert parse_json(answer) == {"a": 1}


def test_braces_inside_strings_do_not_confuse_the_outermost_object():
    assert parse_json('Sure: {"text": "a } in {a} string", "n": [1, 2]} done') == {"text": "a } in {a} string", "n": [1, 2]}


def test_a_bare_array_is_accepted():
    assert parse_json("notes: [1, 2, 3]") == [1, 2, 3]


def test_an_answer_without_json_says_so():
    with pytest.raises(AnswerNotJson, match="no JSON object or array"):
        parse_json("I could not find any notes.")


def test_cost_uses_the_model_price_and_prefix_matches_dated_snapshots():
    assert cost_usd("claude-haiku-4-5-20251001", input_tokens=1_000_000, output_tokens=1_000_000) == pytest.approx(6.0)


def test_cache_writes_reads_and_batches_have_their_own_rates():
    usd = cost_usd("claude-sonnet-4-6", input_tokens=0, output_tokens=0, cache_write_tokens=1_000_000, cache_read_tokens=1_000_000)
    assert usd == pytest.approx(3.0 * 1.25 + 0.3)
    assert cost_usd("claude-sonnet-4-6", input_tokens=1_000_000, output_tokens=0, batch=True) == pytest.approx(1.5)


def test_configured_prices_override_the_table_and_unknown_models_cost_nothing_rather_than_a_guess():
    assert cost_usd("my-model", input_tokens=1_000_000, output_tokens=0) == 0.0
    mine = {"my-model": ModelPrice(input_per_mtok=7.0, output_per_mtok=0.0)}
    assert cost_usd("my-model", input_tokens=1_000_000, output_tokens=0, overrides=mine) == pytest.approx(7.0)

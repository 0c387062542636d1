"""Ebbinghaus decay, recency, reinforcement on retrieval, spaced repetition and the decay sweep."""

from __future__ import annotations

import math

import pytest
from tests.memory.cognitive.helpers import HOUR_US, T0, trace

from engram.memory.cognitive.decay import (
    apply_reinforcement,
    decay_sweep,
    due_for_review,
    ebbinghaus,
    recency,
    reinforce,
    strength_at,
)


def test_strength_follows_ebbinghaus_from_event_time():
    t = trace(s0=0.5)
    assert strength_at(t, T0) == 0.5
    assert strength_at(t, T0 + HOUR_US) == pytest.approx(0.5 * math.exp(-1))
    assert strength_at(t, T0 + 3 * HOUR_US) == pytest.approx(0.5 * math.exp(-3))
    assert ebbinghaus(0.8, 7_200, 3_600) == pytest.approx(0.8 * math.exp(-2))


def test_recency_is_a_true_half_life_of_24_hours():
    assert recency(0) == 1.0
    assert recency(24 * 3_600) == 0.5
    assert recency(48 * 3_600) == 0.25
    assert recency(12 * 3_600) == pytest.approx(math.sqrt(0.5))


def test_reinforcement_interval_starts_at_one_hour_and_doubles_on_each_retrieval():
    t = trace()
    assert t.interval_s == 3_600
    intervals = []
    for _ in range(1, 5):
        at = t.next_due_us  # each retrieval when the review is due
        r = reinforce(t, at)
        apply_reinforcement(t, r)
        intervals.append(t.interval_s)
        assert t.next_due_us == at + int(t.interval_s * 1_000_000)
    assert intervals == [7_200, 14_400, 28_800, 57_600]
    assert t.retrieval_count == 4


def test_stability_grows_with_every_retrieval():
    t = trace()
    previous = t.stability_s
    for i in range(1, 30):
        apply_reinforcement(t, reinforce(t, T0 + i * HOUR_US))
        assert t.stability_s > previous
        previous = t.stability_s


def test_a_weaker_memory_gains_more_stability_than_a_fresh_one():
    fresh, faded = trace("a"), trace("b")
    at_once = reinforce(fresh, T0)  # S = 0.5
    much_later = reinforce(faded, T0 + 5 * HOUR_US)  # S ≈ 0.003
    assert much_later.strength_before < at_once.strength_before
    assert much_later.stability_s / faded.stability_s > at_once.stability_s / fresh.stability_s


def test_stability_gain_shrinks_as_retrievals_pile_up():
    t = trace()
    gains = []
    for i in range(1, 6):
        at = T0 + i * 3 * HOUR_US
        before = t.stability_s
        r = reinforce(t, at)
        gains.append(r.stability_s / before)
        apply_reinforcement(t, r)
    # Same difficulty each time is impossible to arrange exactly; compare retrieval counts at equal difficulty instead.
    a, b = trace("a"), trace("b", retrieval_count=10)
    assert reinforce(a, T0 + HOUR_US).stability_s > reinforce(b, T0 + HOUR_US).stability_s
    assert all(g > 1 for g in gains)


def test_retrieval_raises_strength():
    t = trace()
    at = T0 + 2 * HOUR_US
    before = strength_at(t, at)
    apply_reinforcement(t, reinforce(t, at))
    assert strength_at(t, at) > before
    assert strength_at(t, at) == pytest.approx(max(0.5, before + 0.1))


def test_massed_retrievals_add_no_strength_only_spaced_ones_do():
    massed = trace()  # S0 = 0.5, first review due an hour after encoding
    for _ in range(5):  # five retrievals at one instant
        apply_reinforcement(massed, reinforce(massed, T0))
    assert strength_at(massed, T0) == 0.5 and massed.retrieval_count == 5
    assert massed.stability_s == 3_600 and massed.interval_s == 3_600  # nothing of the interval had passed
    # A memory that barely decays, at 0.95: retrieved a microsecond before its review is due it gains nothing;
    # retrieved when due it gains the 0.1 boost, up to the cap of 1.
    early, due = trace("early", s0=0.95, stability_s=1e12), trace("due", s0=0.95, stability_s=1e12)
    apply_reinforcement(early, reinforce(early, T0 + HOUR_US - 1))
    apply_reinforcement(due, reinforce(due, T0 + HOUR_US))
    assert strength_at(early, T0 + HOUR_US) == pytest.approx(0.95)
    assert strength_at(due, T0 + HOUR_US) == pytest.approx(1.0)


def test_decay_sweep_prunes_what_fell_below_five_hundredths_weakest_first():
    now = T0 + 3 * HOUR_US  # 0.5·e^-3 ≈ 0.0249 < 0.05
    old = trace("old")
    recent = trace("recent", at=T0 + 2 * HOUR_US)  # 0.5·e^-1 ≈ 0.18
    older = trace("older", at=T0 - HOUR_US)  # 0.5·e^-4 ≈ 0.0092
    flashbulb = trace("flash", s0=1.0, stability_s=5 * 3_600)  # 1.0·e^-0.6 ≈ 0.55
    pruned = decay_sweep([old, recent, older, flashbulb], now)
    assert [p.trace_id for p in pruned] == ["older", "old"]
    assert pruned[1].strength == pytest.approx(0.5 * math.exp(-3), abs=1e-6)
    assert all(p.reason == "decay" for p in pruned)
    assert [p.trace_id for p in decay_sweep([old, older], now, max_traces=1)] == ["older"]
    # The boundary: exactly 0.05 stays.
    edge = trace("edge", s0=0.05)
    assert decay_sweep([edge], T0) == []


def test_inactive_traces_are_not_pruned_twice():
    t = trace(active=False)
    assert decay_sweep([t], T0 + 100 * HOUR_US) == []


def test_due_for_review_lists_overdue_traces_first():
    a = trace("a")
    b = trace("b", at=T0 - 2 * HOUR_US, next_due_us=T0 - HOUR_US)
    c = trace("c", next_due_us=T0 + 10 * HOUR_US)
    assert [t.trace_id for t in due_for_review([a, b, c], T0 + HOUR_US)] == ["b", "a"]


def test_ten_recalls_a_second_apart_barely_change_stability_while_ten_a_day_apart_build_it():
    """Issue 12, finding 4: in one 3-minute chat a trace went from 1 h to 32,783 h of stability."""
    massed, spaced = trace("massed"), trace("spaced")
    for i in range(1, 11):
        apply_reinforcement(massed, reinforce(massed, T0 + i * 1_000_000))
        apply_reinforcement(spaced, reinforce(spaced, T0 + i * 24 * HOUR_US))
    assert massed.stability_s < 1.01 * 3_600 and massed.interval_s < 1.01 * 3_600
    assert spaced.stability_s > 100 * 3_600 and spaced.interval_s > 24 * 3_600


def test_recalls_within_one_minute_multiply_stability_by_at_most_a_small_bounded_factor():
    for retrievals in (2, 10, 60, 600):
        t = trace(at=T0 - 30 * 24 * HOUR_US, retrieval_count=0)  # long overdue: the first recall earns the full gain
        apply_reinforcement(t, reinforce(t, T0))
        after_first = t.stability_s
        for k in range(1, retrievals):
            apply_reinforcement(t, reinforce(t, T0 + int(k * 60_000_000 / retrievals)))
        assert t.stability_s / after_first < 1.06, retrievals


def test_a_retrieval_halfway_to_its_review_earns_part_of_the_gain():
    early, due = trace("early"), trace("due")
    half = reinforce(early, T0 + HOUR_US // 2)
    full = reinforce(due, T0 + HOUR_US)
    assert 1.0 < half.stability_s / 3_600 < full.stability_s / 3_600
    assert half.interval_s == pytest.approx(1.5 * 3_600) and full.interval_s == 2 * 3_600

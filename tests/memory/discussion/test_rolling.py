"""The chatSummarySummarizer merge loop: minMemoriesPerSummary and loopIfMemoriesExceed."""

from __future__ import annotations

import pytest

from engram.memory.discussion.rolling import MergePolicy, plan_merges


def test_seven_new_memories_with_the_guide_defaults_merge_three_and_three_and_one_waits():
    assert plan_merges(7, MergePolicy(3, 3)) == [3, 3]


def test_exactly_loop_if_memories_exceed_memories_merge_in_one_batch():
    assert plan_merges(3, MergePolicy(3, 3)) == [3]


def test_fewer_than_min_memories_per_summary_wait():
    assert plan_merges(2, MergePolicy(3, 3)) == []
    assert plan_merges(0, MergePolicy(1, 3)) == []


def test_a_remainder_is_merged_only_when_it_has_at_least_min_memories():
    assert plan_merges(12, MergePolicy(min_memories_per_summary=2, loop_if_memories_exceed=5)) == [5, 5, 2]
    assert plan_merges(11, MergePolicy(min_memories_per_summary=2, loop_if_memories_exceed=5)) == [5, 5]
    assert plan_merges(4, MergePolicy(min_memories_per_summary=1, loop_if_memories_exceed=3)) == [3, 1]


def test_the_policy_refuses_values_below_one():
    with pytest.raises(ValueError, match="loopIfMemoriesExceed"):
        MergePolicy(3, 0)

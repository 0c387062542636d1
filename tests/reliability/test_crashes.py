"""Crash safety, proven by killing: kill -9 during group commits, during a forget, during an LLM call."""

import pytest

from tests.reliability.crash import kill_during_appends

KILLS = 50  # bench/soak.py runs more


def test_kill_9_during_group_commits_loses_no_acknowledged_append_and_half_writes_nothing(tmp_path):
    acked = events = 0
    for trial in range(KILLS):
        # Every fifth trial the process also folds its projections, which must then catch up to a clean replay.
        result = kill_during_appends(tmp_path / f"t{trial}", seed=trial, with_projections=trial % 5 == 0)
        assert result.problems == [], f"trial {trial}: {result.problems[:3]}"
        assert result.replay_differences == [], f"trial {trial}: {result.replay_differences[:3]}"
        acked += result.acked_writes
        events += result.events
    assert acked > KILLS  # the kills landed while appends were being acknowledged

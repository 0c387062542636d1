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


from tests.reliability.crash import FORGET_STAGES, kill_during_forget  # noqa: E402
from tests.reliability.test_forgetting import SECRET, T0, MINUTE, TRIP, WORK, _messages, files_holding  # noqa: E402


@pytest.fixture(scope="module")
def planted_home(tmp_path_factory):
    """A home (hashing embedder, to keep the many copies cheap) with the secret in discussion "trip"."""
    import json

    from tests.reliability.harness import LocalHome

    root = tmp_path_factory.mktemp("planted") / "home"
    root.mkdir()
    (root / "engram.json").write_text(json.dumps({"embedder": {"name": "hashing"}}))
    with LocalHome(root) as local:
        local.say("ana", "trip", _messages(TRIP, T0))
        local.say("ana", "work", _messages(WORK, T0 + 30 * MINUTE))
        local.settle()
        local.recall("ana", f"what is my locker code {SECRET}?", now_us=T0 + 60 * MINUTE)
        local.settle()
    return root


@pytest.mark.parametrize("stage", sorted(FORGET_STAGES))
def test_a_forget_killed_half_way_is_completed_at_the_next_start(planted_home, tmp_path, stage):
    import shutil

    from engram.shard.forget import unfinished_forgets_in
    from tests.reliability.harness import LocalHome

    home = tmp_path / "home"
    shutil.copytree(planted_home, home)
    kill_during_forget(tmp_path, stage, "ana", "trip")
    pending = unfinished_forgets_in(home / "log" / "shard-000.duckdb")  # what status shows before the start
    if stage != "scrubbing":  # the shard's part was not done: status says so
        assert [p["streams"] for p in pending] == [["trip"]]
    with LocalHome(home) as local:  # the next start
        assert local.shard.unfinished_forgets() == []
        if stage != "scrubbing":
            assert any("interrupted forget" in line for line in local.shard.status()["recovered"])
        local.settle()
        assert local.shard.query("SELECT discussion_id FROM discussions")[1] == [("work",)]
        assert local.shard.verify_replay() == []
    assert files_holding(home, SECRET.encode()) == []
    assert files_holding(home, b"Priya wants the churn numbers") != []


def test_a_policy_killed_mid_llm_call_resumes_and_records_each_memory_once(tmp_path, monkeypatch):
    import json

    from tests.memory.discussion.engine import LocalEngine
    from tests.memory.discussion.conftest import events
    from tests.providers.llm.fake_messages_api import FakeMessagesApi
    from tests.reliability.crash import kill_during_llm_call, llm_home_config
    from tests.reliability.test_llm_outage import _assert_nothing_twice, _pump_until_idle, answer

    api = FakeMessagesApi().start()
    try:
        api.answer = answer
        home = tmp_path / "home"
        home.mkdir()
        (home / "engram.json").write_text(json.dumps(llm_home_config(api.url, timeout_s=30)))
        api.then(200).then(200, delay=30)  # the first answer at once, the second never in time
        kill_during_llm_call(home, api)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        api.script.clear()
        with LocalEngine(home) as engine:  # the restart: the policy resumes from the log and its snapshot
            _pump_until_idle(engine)
            chunks, vectors = events(engine, "d", "ChunkSummarized"), events(engine, "d", "VectorMemoryStored")
            assert len(chunks) == 2 and len(vectors) == 2
            _assert_nothing_twice(engine)
            assert engine.shard.verify_replay() == []
    finally:
        api.stop()

"""Read your writes: a write answers with its position; a read `after` it answers once what it reads has handled it,
or refuses (503 lagging, naming what lags) after a bounded wait; a read without `after` waits for nobody."""

from __future__ import annotations

import pytest

from engram.api import positions
from engram.api import types as t
from engram.api.errors import ApiError

AGENT = "ada"
DISCUSSION = "lisbon-trip"


@pytest.fixture
def mem(tmp_path, monkeypatch):
    """An engram whose memory is created only when asked (no background work): what a busy server looks like."""
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    engram = Engram(InProcessRuntime(load_service_config(tmp_path / "home"), auto_settle=False).start())
    try:
        yield engram
    finally:
        engram.close()


def remember(mem, text: str, agent: str = AGENT) -> t.AppendResponse:
    return mem.append_messages(agent, DISCUSSION, t.AppendRequest(messages=[t.Message(role="user", content=text)]))


def test_every_write_answers_with_its_position_in_the_log(mem):
    first = remember(mem, "My sister Ines is vegetarian.")
    second = remember(mem, "We land in Lisbon on the 3rd of May.")
    shard = mem.rt.shard_of(AGENT)
    assert first.position == f"{shard}:{first.results[0].seqs[-1]}"
    assert positions.parse(second.position)[shard] > positions.parse(first.position)[shard]
    mood = mem.set_mood(AGENT, t.MoodRequest(valence=0.5, arousal=0.1, dominance=0.0))
    assert mood.position == f"{shard}:{mood.seq}"


def test_a_recall_after_a_write_finds_what_was_written_and_one_without_after_does_not_wait(mem):
    written = remember(mem, "My sister Ines is vegetarian, so restaurants matter a lot.")
    ask = t.RecallRequest(query="Is Ines vegetarian?", record=False)
    assert mem.recall(AGENT, ask).hits == []  # memory not created yet, and a plain read does not wait for it
    mem.reach(AGENT, written.position, "recall")
    hits = mem.recall(AGENT, ask).hits
    assert hits and "vegetarian" in hits[0].content


def test_a_read_after_a_position_its_memory_has_not_reached_is_refused_naming_what_lags(mem, monkeypatch):
    written = remember(mem, "We want a hotel in Alfama near the river.")
    host = mem.rt._member("auto-ingest", AGENT, AGENT)
    monkeypatch.setattr(host, "pump", lambda: 0)  # auto-ingest stuck (an unreachable LLM, say)
    with pytest.raises(ApiError) as refused:
        mem.reach(AGENT, written.position, "recall")
    assert refused.value.status == 503 and refused.value.code == "lagging"
    assert "auto-ingest" in refused.value.message and written.position in refused.value.message
    assert refused.value.retry_after == 1.0


def test_a_position_of_another_shard_or_none_waits_for_nothing(mem):
    shard = mem.rt.shard_of(AGENT)
    mem.reach(AGENT, None, "recall")
    mem.reach(AGENT, f"{shard + 1}:999999", "recall")


def test_a_malformed_position_is_refused_saying_what_one_looks_like(mem):
    with pytest.raises(ApiError) as refused:
        mem.reach(AGENT, "seq=12", "recall")
    assert refused.value.code == "invalid_request" and "position token" in refused.value.message


def test_positions_merge_to_the_furthest_of_each_shard():
    assert positions.merge("0:12", "1:5,0:7", None, "") == "0:12,1:5"
    assert positions.parse("0:12,1:5") == {0: 12, 1: 5}


def test_a_chat_turn_answers_with_the_position_of_both_its_messages(mem):
    turn = mem.chat(AGENT, DISCUSSION, t.ChatRequest(message="Remember that Ines is vegetarian.", memory=False))
    shard = mem.rt.shard_of(AGENT)
    assert turn.position == f"{shard}:{max(turn.user_seq, turn.reply_seq)}"
    mem.reach(AGENT, turn.position, "log")
    assert [m.role for m in mem.list_messages(AGENT, DISCUSSION).messages] == ["user", "assistant"]

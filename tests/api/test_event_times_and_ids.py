"""What a client may say about a message's time and identity (issue 21, finding 11).

- Event time is engram's clock: a message dated far in the future would move the agent's decay and consolidation
  clock there. One rule, applied when a request arrives and before anything is recorded: a time more than
  `limits.maxFutureSeconds` (a day) after the server's clock is refused; any past time is taken as given (imported
  history). Replay folds what was recorded and never applies the rule.
- A message id names one message: the same id with the same words again is a no-op (a client's retry); with other
  words it is refused (409, naming the id) instead of being dropped without a word.

The API over the in-process runtime (real DuckDB log and projections, no Ray).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from engram.api import types as t
from engram.api.errors import ApiError, translate

AGENT = "ada"
DISCUSSION = "trip"


def open_home(home, **limits):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime

    if limits:
        (home / "engram.json").write_text(json.dumps({"limits": limits}))
    return Engram(InProcessRuntime(load_service_config(home), groups=["summarizer", "traces"]).start())


@pytest.fixture
def mem(home_dir):
    engram = open_home(home_dir)
    yield engram
    engram.close()


def message(content: str, *, ts: datetime | None = None, message_id: str | None = None) -> t.Message:
    return t.Message(role="user", content=content, ts=ts, message_id=message_id)


def append(mem, *messages: t.Message) -> t.AppendResult:
    return mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=list(messages))).results[0]


def contents(mem) -> list[str]:
    _, rows = mem.sql("SELECT content FROM messages WHERE discussion_id = ? ORDER BY seq", [DISCUSSION])
    return [r[0] for r in rows]


def refusal(call) -> ApiError:
    """The refusal `call` raises, as every interface answers it (`translate`: REST's status, code and message)."""
    with pytest.raises(Exception) as caught:
        call()
    refused = translate(caught.value)
    assert refused is not None, caught.value
    return refused


def head(mem) -> int:
    return sum(mem.rt.heads().values())


def test_a_message_dated_far_in_the_future_is_refused_and_nothing_is_recorded(mem):
    append(mem, message("first"))
    before = head(mem)
    with pytest.raises(ApiError) as refused:
        append(mem, message("still first"), message("from 2199", ts=datetime(2199, 1, 1, tzinfo=timezone.utc)))
    assert refused.value.status == 422 and refused.value.code == "invalid_request"
    assert refused.value.message.startswith(f"discussion {DISCUSSION}: message 2: time 2199-01-01T00:00:00Z is more "
                                            "than 86400 s after this server's clock")
    assert "limits.maxFutureSeconds" in refused.value.message
    assert head(mem) == before and contents(mem) == ["first"]  # all or nothing: neither message went in


def test_past_times_and_clocks_a_little_ahead_are_taken_as_given(mem):
    now = datetime.now(timezone.utc)
    imported = datetime(1999, 12, 31, 23, 59, tzinfo=timezone.utc)
    append(mem, message("an old diary entry", ts=imported), message("a client whose clock is ahead",
                                                                     ts=now + timedelta(hours=3)))
    _, rows = mem.sql("SELECT content, ts FROM messages WHERE discussion_id = ? ORDER BY seq", [DISCUSSION])
    assert [r[0] for r in rows] == ["an old diary entry", "a client whose clock is ahead"]
    assert rows[0][1] == imported


def test_every_recorded_time_a_client_gives_follows_the_rule(mem):
    append(mem, message("hello"))
    future = datetime.now(timezone.utc) + timedelta(days=30)
    refusals = [
        lambda: mem.record_tool_failure(AGENT, DISCUSSION, t.ToolFailureRequest(tool="web", error="timeout", ts=future)),
        lambda: mem.set_mood(AGENT, t.MoodRequest(valence=0.1, arousal=0.1, dominance=0.1, ts=future)),
        lambda: mem.write_working_memory(AGENT, t.WorkingMemoryWrite(markdown="notes", ts=future)),
        lambda: mem.recall(AGENT, t.RecallRequest(query="hello", at=future)),  # recorded as TraceRetrieved at `at`
    ]
    before = head(mem)
    for call in refusals:
        with pytest.raises(ApiError, match="is more than 86400 s after this server's clock"):
            call()
    assert head(mem) == before
    # A recall that only looks records nothing: it may ask how memory will look in a month.
    assert mem.recall(AGENT, t.RecallRequest(query="hello", at=future, record=False)).now_us > 0


def test_the_bound_is_a_setting_and_replay_never_applies_it(home_dir):
    soon = datetime.now(timezone.utc) + timedelta(days=10)
    with open_home(home_dir, maxFutureSeconds=30 * 86_400) as mem:  # a home that allows a month ahead
        append(mem, message("planned ahead", ts=soon))
    with open_home(home_dir, maxFutureSeconds=60) as mem:  # now a minute: new requests are bound by it...
        with pytest.raises(ApiError, match="more than 60 s after"):
            append(mem, message("too far", ts=soon))
        job = mem.replay(t.ReplayRequest(verify=True))  # ...but what was recorded replays as it was
        done = mem.jobs.wait(job.id, 300)
        assert done.state == "succeeded", done.error
        assert contents(mem) == ["planned ahead"]
        _, rows = mem.sql("SELECT ts FROM messages WHERE discussion_id = ?", [DISCUSSION])
        assert abs(rows[0][0] - soon) < timedelta(milliseconds=1)


def test_the_same_message_id_with_the_same_words_is_a_no_op(mem):
    first = append(mem, message("I live in Porto.", message_id="m-1"))
    again = append(mem, message("I live in Porto.", message_id="m-1",
                                ts=datetime.now(timezone.utc) - timedelta(minutes=5)))  # a retry: another time is fine
    assert (first.appended, again.appended, again.duplicates) == (1, 0, 1)
    assert again.seqs == first.seqs and contents(mem) == ["I live in Porto."]


def test_the_same_message_id_with_other_words_is_refused_naming_the_id(mem):
    append(mem, message("I live in Porto.", message_id="m-1"))
    before = head(mem)
    refused = refusal(lambda: append(mem, message("something new", message_id="m-2"),
                                     message("I live in Lisbon.", message_id="m-1")))
    assert refused.status == 409 and refused.code == "conflict"
    assert refused.message.startswith(f"message id 'm-1' of '{DISCUSSION}' is already recorded (seq ")
    assert "with other content" in refused.message
    assert head(mem) == before and contents(mem) == ["I live in Porto."]  # neither message of the request went in


def test_two_messages_of_one_request_under_one_id_with_other_words_are_refused_before_anything_is_recorded(mem):
    before = head(mem)
    refused = refusal(lambda: append(mem, message("one", message_id="dup"), message("two", message_id="dup")))
    assert (refused.status, refused.code) == (422, "malformed_messages")
    assert refused.message == (f"discussion {DISCUSSION}: message 2 (dup): message id 'dup' is message 1's too, with "
                               "other words: a message id names one message")
    assert head(mem) == before and contents(mem) == []  # not even the agent's settings


def test_the_log_itself_refuses_an_event_id_repeated_with_other_content(tmp_path):
    """Every path into the log (ingest, chat, workflows, the proxy, a script's `append`): the store compares."""
    from engram.events.envelope import NewEvent, Write
    from engram.events.messages import MessageAppended
    from engram.events.store import EventIdConflict, EventStore

    def write(content: str, mid: str = "m-1") -> Write:
        event = MessageAppended(role="user", content=content, message_id=mid, token_estimate=3)
        return Write(DISCUSSION, AGENT, (NewEvent(event, 1_714_557_600_000_000, f"msg:{mid}"),))

    store = EventStore(tmp_path / "log.duckdb")
    try:
        first = store.append_many([write("I live in Porto.")])[0]
        assert store.append_many([write("I live in Porto.")])[0].seqs == first.seqs  # a repeat: a no-op
        with pytest.raises(EventIdConflict, match="message id 'm-1' of 'trip' is already recorded \\(seq 1\\)"):
            store.append_many([write("I live in Lisbon.")])
        with pytest.raises(EventIdConflict, match="message id 'm-2'"):  # within one commit too
            store.append_many([write("a", "m-2"), write("b", "m-2")])
        assert store.head() == 1
    finally:
        store.close()

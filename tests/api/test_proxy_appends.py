"""What the memory proxy writes and reads per chat completion (the API over the in-process runtime, the labelled
offline responder): the new messages and the reply in one append, the discussion's log read only when the proxy's
own tail record cannot be trusted, and never a message twice, also when that record is stale."""

from __future__ import annotations

import json

import pytest

from engram.api import types as t

AGENT = "ada"
DISCUSSION = "lisbon-trip"
TAG = f"[DiscussionId]{DISCUSSION}[/DiscussionId]"
READERS = [{"id": "search", "type": "VectorMemorySearch", "input": "{chat_user_prompt_last_one}", "limit": 3},
           {"id": "recall", "type": "MemoryRecall", "input": "{chat_user_prompt_last_one}", "limit": 3},
           {"id": "respond", "type": "Standard", "systemPrompt": "{chat_system_prompt} {search} {recall}",
            "returnToUser": True}]
USER = ["I'm planning a trip to Lisbon in May with my sister Ines.", "We want a hotel near the river.",
        "Ines is vegetarian, remember that.", "What did I say about Ines?"]


@pytest.fixture
def mem(tmp_path, monkeypatch):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = tmp_path / "home"
    (home / "workflows").mkdir(parents=True)
    (home / "workflows" / "openai-proxy.json").write_text(json.dumps(READERS))
    engram = Engram(InProcessRuntime(load_service_config(home), groups=["summarizer", "traces"]).start())
    try:
        yield engram
    finally:
        engram.close()


class Spy:
    """Counts the runtime's reads of the discussion and its appends of messages."""

    def __init__(self, rt, monkeypatch):
        self.reads, self.appends = 0, []
        read, append = rt.read, rt.append

        def counted_read(agent, after=0, **filters):
            self.reads += filters.get("stream") == DISCUSSION
            return read(agent, after, **filters)

        def counted_append(writes):
            self.appends.append([e.event.role for w in writes for e in w.events if hasattr(e.event, "role")])
            return append(writes)

        monkeypatch.setattr(rt, "read", counted_read)
        monkeypatch.setattr(rt, "append", counted_append)


def turn(mem, history: list[dict]) -> t.CompletionResponse:
    """One request of a front-end that resends the whole history; the reply joins the history."""
    messages = [t.ChatTurn(role="system", content=f"You are Ada's travel assistant. {TAG}")]
    messages += [t.ChatTurn(role=m["role"], content=m["content"]) for m in history]
    out = mem.complete(AGENT, t.CompletionRequest(messages=messages))
    history.append({"role": "assistant", "content": out.reply})
    return out


def logged(mem) -> list[tuple[str, str]]:
    return [(r.event.role, r.event.content) for r in mem.rt.read(AGENT, stream=DISCUSSION, types=["MessageAppended"],
                                                                   limit=None)]


def expected(history: list[dict]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in history]


def test_a_turn_appends_the_new_message_and_the_reply_in_one_write(mem, monkeypatch):
    spy = Spy(mem.rt, monkeypatch)
    history = [{"role": "user", "content": USER[0]}]
    out = turn(mem, history)
    assert out.appended == 1 and out.reply_seq is not None and out.responder.startswith("offline")
    assert [roles for roles in spy.appends if roles] == [["user", "assistant"]]
    assert logged(mem) == expected(history)


def test_after_its_own_append_the_proxy_answers_the_next_turns_without_reading_the_log(mem, monkeypatch):
    spy = Spy(mem.rt, monkeypatch)
    history = []
    for text in USER:
        history.append({"role": "user", "content": text})
        turn(mem, history)
    assert spy.reads == 1  # the first turn only: the proxy then knows the discussion's tail
    assert logged(mem) == expected(history)


def test_an_append_through_another_path_makes_the_proxy_read_the_log_again(mem, monkeypatch):
    history = [{"role": "user", "content": USER[0]}]
    turn(mem, history)
    mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[t.Message(role="user", content=USER[1])]))
    history.append({"role": "user", "content": USER[1]})  # the front-end shows it too
    spy = Spy(mem.rt, monkeypatch)
    history.append({"role": "user", "content": USER[2]})
    turn(mem, history)
    assert spy.reads == 1
    assert logged(mem) == expected(history)  # USER[1] once: the proxy saw it in the log


def test_a_stale_tail_record_never_makes_the_proxy_append_a_message_twice(mem):
    from engram.boot.embedded import Engram

    history = [{"role": "user", "content": USER[0]}]
    turn(mem, history)
    # Another process answers the next turn (a second replica): this API's tail record does not know about it.
    other = Engram(mem.rt)
    history.append({"role": "user", "content": USER[1]})
    turn(other, history)
    history.append({"role": "user", "content": USER[2]})
    out = turn(mem, history)
    assert logged(mem) == expected(history)  # each message once: the other replica's are recognised by their ids
    assert out.appended == 1  # USER[2]: USER[1] and its reply were in the log already (duplicates, not counted)


def test_after_a_forget_the_resent_history_is_recorded_again(mem):
    history = [{"role": "user", "content": USER[0]}]
    turn(mem, history)
    job = mem.forget(AGENT, DISCUSSION, t.ForgetRequest(reason="test"))
    assert mem.jobs.wait(job.id, timeout=300).state == "succeeded"
    assert logged(mem) == []
    history.append({"role": "user", "content": USER[1]})
    turn(mem, history)
    assert logged(mem) == expected(history)


def test_a_workflow_that_creates_memories_before_answering_gets_the_message_appended_first(mem, monkeypatch):
    creating = [{"id": "recent", "type": "RecentMemory"}] + READERS
    (mem.home.root / "workflows" / "openai-proxy.json").write_text(json.dumps(creating))
    spy = Spy(mem.rt, monkeypatch)
    history = [{"role": "user", "content": USER[0]}]
    turn(mem, history)
    assert [roles for roles in spy.appends if roles] == [["user"], ["assistant"]]
    assert logged(mem) == expected(history)


def text_turn(mem, prompt: str) -> t.CompletionResponse:
    """One request of a text front end (/v1/completions, /api/generate): the tagged prompt alone, no history."""
    return mem.complete(AGENT, t.CompletionRequest(messages=[t.ChatTurn(role="user", content=f"{TAG} {prompt}")],
                                                   text_prompt=True))


def test_a_retried_text_prompt_is_stored_once_and_a_later_repeat_is_a_new_turn(mem):
    first = text_turn(mem, USER[0])
    again = text_turn(mem, USER[0])  # the client did not get the answer and sends the prompt again
    assert (first.appended, again.appended) == (1, 0) and again.reply == first.reply
    assert logged(mem) == [("user", USER[0]), ("assistant", first.reply)]
    other = text_turn(mem, USER[1])
    repeat = text_turn(mem, USER[0])  # said again after another exchange: a new turn
    assert (other.appended, repeat.appended) == (1, 1)
    assert logged(mem) == [("user", USER[0]), ("assistant", first.reply), ("user", USER[1]),
                           ("assistant", other.reply), ("user", USER[0]), ("assistant", repeat.reply)]

"""Listing and paging: agents with their counts, an agent's discussions, a discussion's messages a page at a time
(every message exactly once, also while messages arrive), an agent's memories of each kind."""

from __future__ import annotations

import threading

import pytest

from engram.api import types as t
from engram.api.errors import ApiError

ADA, BEN = "ada", "ben"


@pytest.fixture
def mem(tmp_path, monkeypatch):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    engram = Engram(InProcessRuntime(load_service_config(tmp_path / "home"),
                                     groups=["summarizer", "auto-ingest", "traces", "observer"]).start())
    try:
        yield engram
    finally:
        engram.close()


def say(mem, agent: str, discussion: str, *texts: str, metadata=None) -> t.AppendResponse:
    return mem.append_messages(agent, discussion, t.AppendRequest(messages=[
        t.Message(role="user", content=x, metadata=metadata or {}) for x in texts]))


def all_pages(mem, agent, discussion, order="oldest", limit=3, cursor=None):
    seen = []
    while True:
        page = mem.list_messages(agent, discussion, order=order, limit=limit, cursor=cursor)
        seen += page.messages
        if page.next_cursor is None:
            return seen, (str(seen[-1].seq) if seen else cursor)
        cursor = page.next_cursor


def test_agents_are_listed_with_their_discussions_messages_traces_and_last_activity(mem):
    say(mem, ADA, "lisbon", "I fly to Lisbon on the 3rd of May.", "My sister Ines comes along.")
    say(mem, ADA, "work", "The quarterly report is due Friday.")
    say(mem, BEN, "garden", "The tomatoes need water every morning.")
    mem.wait_idle()
    agents = {a.agent: a for a in mem.list_agents().agents}
    assert set(agents) == {ADA, BEN}
    assert (agents[ADA].discussions, agents[ADA].messages) == (2, 3)
    assert agents[ADA].traces >= 1 and agents[ADA].last_activity >= agents[ADA].first_activity
    assert [a.agent for a in mem.list_agents([BEN]).agents] == [BEN]


def test_an_agents_discussions_come_a_page_at_a_time_each_once(mem):
    for i in range(7):
        say(mem, ADA, f"talk-{i}", f"Message of talk {i}.")
    say(mem, BEN, "talk-bens", "Not ada's.")
    got, cursor = [], None
    while True:
        page = mem.list_discussions(ADA, limit=3, cursor=cursor)
        got += [d.discussion for d in page.discussions]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert got == [f"talk-{i}" for i in range(7)]


def test_a_discussions_messages_page_oldest_or_newest_first_with_their_metadata(mem):
    say(mem, ADA, "lisbon", *[f"Message {i}." for i in range(10)], metadata={"source": "test"})
    oldest, _ = all_pages(mem, ADA, "lisbon")
    newest, _ = all_pages(mem, ADA, "lisbon", order="newest", limit=4)
    assert [m.content for m in oldest] == [f"Message {i}." for i in range(10)]
    assert [m.content for m in newest] == [f"Message {i}." for i in reversed(range(10))]
    assert oldest[0].metadata == {"source": "test"} and oldest[0].role == "user"


def test_paging_returns_every_message_exactly_once_while_messages_arrive(mem):
    say(mem, ADA, "busy", "Message 0.")
    stop, written = threading.Event(), [1]

    def writer():
        while not stop.is_set() and written[0] < 60:
            say(mem, ADA, "busy", *[f"Message {written[0] + k}." for k in range(3)])
            written[0] += 3

    thread = threading.Thread(target=writer)
    thread.start()
    seen, cursor = [], None
    try:
        while thread.is_alive():
            page, cursor = all_pages(mem, ADA, "busy", limit=5, cursor=cursor)
            seen += page
    finally:
        stop.set()
        thread.join()
    page, cursor = all_pages(mem, ADA, "busy", limit=5, cursor=cursor)
    seen += page
    assert [m.content for m in seen] == [f"Message {i}." for i in range(written[0])]
    assert len({m.seq for m in seen}) == len(seen)


def test_an_agents_memories_of_each_kind_page_in_the_order_they_were_made(mem):
    say(mem, ADA, "lisbon", "My sister Ines is vegetarian.", "We land in Lisbon on the 3rd of May.",
        "The hotel is in Alfama, near the river.", "Our budget for food is forty euros a day.")
    mem.wait_idle()
    traces, cursor = [], None
    while True:
        page = mem.list_memories(ADA, "traces", limit=1, cursor=cursor)
        traces += page.memories
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    _, rows = mem.sql_rows("SELECT trace_id, content FROM memory_traces WHERE agent = ? ORDER BY encoded_at, trace_id",
                           [ADA])
    assert len(rows) >= 2 and [(m["trace_id"], m["content"]) for m in traces] == [tuple(r) for r in rows]
    assert mem.list_memories(ADA, "traces", discussion="lisbon").memories
    for kind in ("chunks", "vectors", "observations"):
        assert mem.list_memories(ADA, kind).kind == kind  # every kind answers (empty before the Summarizer's first chunk)


def test_another_agents_discussion_and_a_made_up_cursor_are_refused(mem):
    say(mem, ADA, "lisbon", "Hello.")
    say(mem, BEN, "garden", "Hi.")
    with pytest.raises(ApiError) as refused:
        mem.list_messages(ADA, "garden")
    assert refused.value.code == "unknown_discussion" and BEN not in refused.value.message
    with pytest.raises(ApiError) as refused:
        mem.list_memories(ADA, "traces", cursor="not-a-cursor")
    assert refused.value.code == "invalid_request"
    with pytest.raises(ApiError) as refused:
        mem.list_memories(ADA, "dreams")
    assert refused.value.code == "invalid_request" and "traces" in refused.value.message

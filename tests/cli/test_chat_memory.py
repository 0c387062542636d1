"""`engram chat`'s in-chat commands read the agent's memory whichever discussion the chat is in: working memory is
the agent's, not a discussion's. Over the in-process runtime (no server: ChatSession reads through any API)."""

from __future__ import annotations

import pytest

AGENT = "priya-helper"
SAMPLE = "engram/samples/acme-dashboard.jsonl"


@pytest.fixture(scope="module")
def mem(tmp_path_factory):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.memory.ingest.formats import parse_file
    from engram.memory.ingest.messages import discussion_write
    from engram.runtime.inprocess import InProcessRuntime

    home = tmp_path_factory.mktemp("chat") / "home"
    home.mkdir()
    mem = Engram(InProcessRuntime(load_service_config(home)).start())
    conv = parse_file(SAMPLE, now_us=0)[0]
    write = discussion_write(AGENT, conv.discussion, conv.messages, max_message_chars=100_000)
    mem.sync_settings(AGENT, ts_us=write.events[0].ts_us)
    mem.append([write])
    assert mem.wait_idle(timeout=300)
    yield mem
    mem.close()


def test_memory_in_a_new_discussion_shows_the_agents_working_memory(mem):
    from engram.cli.chat import ChatSession

    slots = mem.working_memory(AGENT).slots
    assert slots
    shown = ChatSession(mem, AGENT, "a-new-discussion").handle("/memory")
    assert "nothing in memory yet" not in shown
    assert f"working memory of {AGENT} ({len(slots)} of {slots[0]['capacity']} slots" in shown
    assert _clip_of(slots[0]["content"]) in shown
    assert "discussion a-new-discussion: no messages yet" in shown


def test_memory_of_an_agent_with_no_memory_says_so(mem):
    from engram.cli.chat import ChatSession

    assert ChatSession(mem, "nobody-yet", "hello").handle("/memory") == \
        "nothing in memory yet for nobody-yet (say something first)"


def _clip_of(text: str) -> str:
    from engram.cli.chat import _clip

    return _clip(text)

"""Infinite context and `engram chat` on real Ray actors: the API, and a chat typed into a pseudo-terminal."""

from __future__ import annotations

import json
import os
import re
import sys
import time

import msgspec
import pytest
from tests.cli.helpers import SAMPLE
from tests.memory.context.terminal import Terminal

from engram.api import types as t
from engram.events.envelope import from_us

pytestmark = pytest.mark.ray
AGENT = "a"
DISCUSSION = "acme-dashboard"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("chat-home")


@pytest.fixture(scope="module")
def served(ray_session, home):
    """Engram on the test session's Ray for a home whose agent has a 1,000-token window, the sample ingested,
    served over HTTP on loopback as `engram serve` serves it: the chat command is its client."""
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.memory.ingest.formats import parse_file
    from engram.runtime.ray_runtime import RayRuntime
    from tests.server.helpers import Served

    home_dir = home
    config_path = home_dir / "agents" / AGENT / "agent.config.json"
    config_path.parent.mkdir(parents=True)
    config_path.write_text(json.dumps({"memory": {"infiniteContext": {"contextWindowTokens": 1_000}}}))
    config = load_service_config(home_dir)
    mem = Engram(RayRuntime(config).start())
    try:
        mem.rt.start_policies()
        conv = parse_file(SAMPLE, now_us=0)[0]
        # The conversation as if it had just happened: the chat continues it now (wall-clock time). Dated
        # months ago, the hourly consolidations of the silence since would have let most of it decay.
        shift = time.time_ns() // 1_000 - conv.messages[-1].ts_us - 3_600 * 1_000_000
        mem.append_messages(AGENT, conv.discussion, t.AppendRequest(messages=[
            t.Message(role=m.role, content=m.content, ts=from_us(m.ts_us + shift), name=m.name, message_id=m.message_id)
            for m in conv.messages]))
        assert mem.wait_idle(timeout=180)
        with Served(mem):
            yield mem
    finally:
        mem.close()


def test_the_api_reports_the_compactions_and_the_context_that_would_be_sent(served):
    from engram.client import Client

    with Client.for_home(served.home.root, start=False) as api:
        comp = api.compactions(AGENT, DISCUSSION)
        ctx = api.context(AGENT, DISCUSSION)
    history = comp.compactions
    assert history, "45 messages (~1,100 tokens) pass 75% of a 1,000-token window"
    first = history[0]
    assert first["strategy"] == "sliding" and first["window_tokens"] == 1_000 and first["first_turn"] == 1
    assert first["context_tokens_before"] > 750 and first["compression_ratio"] > 1
    assert first["dropped"] and first["preserved_entities"] and first["transparency"] == "full"
    chain = [c for c in history if c["in_chain"]]
    assert len(chain) == 1 and chain[0]["last_turn"] <= 45 - 20
    assert comp.chain["nodes"] == [chain[0]["node_id"]]
    doc = ctx.context
    blocks = {b["name"]: b for b in doc["blocks"]}
    assert [x["turn"] for x in doc["turns"]] == list(range(chain[0]["last_turn"] + 1, 46))
    assert blocks["chain"]["text"].startswith(chain[0]["label"])
    assert doc["query"] == "Will do. After launch I'm taking a long weekend in Porto to recover."
    assert blocks["recalled"]["text"]  # traces recalled for the latest user message
    assert blocks["working_memory"]["tokens"] <= 50  # 5% of the window
    assert ctx.rendered.index("--- compaction chain ---") < ctx.rendered.index("--- recent turns")


def _observe(mem, text: str) -> None:
    from engram.events.background import ObservationNote, ObservationsRecorded
    from engram.events.envelope import NewEvent, Write
    from engram.events.provenance import LlmCall

    _, rows = mem.sql("SELECT min(seq), max(seq), epoch_us(min(ts)) FROM messages WHERE discussion_id = ?", [DISCUSSION])
    first, last, _ = rows[0]
    at = 1_772_712_000_000_000  # 2026-03-05T12:00:00Z
    note = ObservationNote(note_id="obs-test-1", type="commitment", text=text, importance=0.8, observed_us=at,
                           source_seqs=(first + 31,))
    event = ObservationsRecorded(notes=(note,), first_seq=first, last_seq=last, input_tokens=1_100, output_tokens=12,
                                 buffered=False, llm=LlmCall(provider="offline", model="offline-heuristic-v1",
                                                             task="observe", prompt_hash="test"))
    mem.append([Write(DISCUSSION, AGENT, (NewEvent(event, at, event_id="observer:test-1"),))])


def test_a_person_chats_with_memory_through_a_terminal(served, home):
    env = {**os.environ, "ENGRAM_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    term = Terminal([sys.executable, "-m", "engram", "chat", "--agent", AGENT,
                     "--discussion", DISCUSSION], env)
    try:
        banner = term.expect(r"you> ", timeout=120)
        assert f"engram chat: agent {AGENT}, discussion {DISCUSSION} (45 earlier messages), memory on" in banner
        assert "not a language model" in banner

        term.send("My cat is called Miso and she hates thunderstorms.")
        reply = term.expect(r"you> ")
        assert "agent> [offline heuristic, not a language model]" in reply
        assert served.wait_idle(timeout=120)  # a pause: auto-ingest has encoded what was said

        term.send("What is my cat called?")
        reply = term.expect(r"you> ")
        assert "agent> [offline heuristic, not a language model] The memories most relevant to the last message:" in reply
        assert "Miso" in reply

        # A preference stated days ago (important enough to be reviewed by spaced repetition; the passing
        # idea of a weather widget, importance 0.3, has decayed below 0.05 and been pruned by then).
        term.send("Which CSS approach do I dislike?")
        reply = term.expect(r"you> ")
        assert re.search(r"(I really dislike|User really dislikes) CSS-in-JS", reply)  # the sentence, or the fact made of it

        term.send("/recall Miso")
        out = term.expect(r"you> ")
        assert 'recall "Miso": ' in out
        assert re.search(r"(My|User's) cat is called Miso", out)  # the sentence, or the fact made of it

        _observe(served, "Priya promised to review the RLS policies by Wednesday.")  # as the Observer records notes
        term.send("/memory")
        out = term.expect(r"you> ")
        assert f"working memory of {AGENT} (" in out and "[ACTIVE]" in out
        assert "recent observations (1 latest notes of the Observer):" in out
        assert "Date: 2026-03-05" in out and "- Priya promised to review the RLS policies by Wednesday." in out
        assert f"compaction history of {DISCUSSION}: " in out and "chain: [L0: turns 1-" in out
        assert "sliding threshold" in out and "dropped " in out

        term.send("/summary")
        out = term.expect(r"you> ")
        assert "compaction chain (" in out and "[L0: turns 1-" in out

        term.send("/nonsense")
        assert "unknown command /nonsense" in term.expect(r"you> ")

        term.send("/quit")
        assert "bye" in term.expect(r"bye[^\n]*\n")
        assert term.wait() == 0
    finally:
        if term.pid:
            try:
                os.kill(term.pid, 9)
            except ProcessLookupError:
                pass
    _, rows = served.sql(
        "SELECT role, content, json_extract_string(payload, '$.metadata.responder') FROM events "
        "WHERE stream = ? AND type = 'MessageAppended' ORDER BY seq", [DISCUSSION])
    said = rows[45:]
    assert [r[0] for r in said] == ["user", "assistant"] * 3
    assert said[0][1] == "My cat is called Miso and she hates thunderstorms."
    assert all(r[2].startswith("offline/offline-heuristic") for r in said if r[0] == "assistant")
    # Each reply is recorded with the memory injected for its turn (what auto-ingest, the Observer and the Reflector
    # do not take as the assistant's own words, `engram.memory.cognitive.llm_bridge.own_words`).
    _, rows = served.sql(
        "SELECT json_extract_string(payload, '$.metadata.injected_memory') FROM events "
        "WHERE stream = ? AND type = 'MessageAppended' AND payload->>'$.role' = 'assistant' ORDER BY seq", [DISCUSSION])
    assert "Miso" in (rows[-2][0] or "")  # the reply to "What is my cat called?" was written from the Miso memory

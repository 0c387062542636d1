"""Memory follows edits of messages (issue 24 item 4): a front end resends its history through the real `openai` SDK
with an earlier message edited or deleted; the log records the change (the old words kept for replay), and the
facts, traces, chunk memories and the conversation itself follow it. One served home (in-process runtime, the
labelled offline responder) for the whole module."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from engram.api import types as t
from engram.api.errors import ApiError

AGENT = "ada"
DISCUSSION = "garage"
TAG = f"[DiscussionId]{DISCUSSION}[/DiscussionId]"
BLUE = "I drive a blue Volvo to work every day."
RED = "I drive a red Volvo to work every day."
VEGETARIAN = "My neighbour Oskar is a strict vegetarian."
# Small chunks, so that a few turns make chunk memories (WilmerAI's settings file, in the home).
DISCUSSION_SETTINGS = {"chunkEstimatedTokenSize": 40, "maxMessagesBetweenChunks": 4, "lookbackStartTurn": 0}


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import json

    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    home = tmp_path_factory.mktemp("edits") / "home"
    home.mkdir()
    (home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(DISCUSSION_SETTINGS))
    mp = pytest.MonkeyPatch()
    mp.delenv("ANTHROPIC_API_KEY", raising=False)
    mem = Engram(InProcessRuntime(load_service_config(home)).start())
    try:
        with Served(mem) as server:
            yield server, mem
    finally:
        mem.close()
        mp.undo()


def _chat(client, history: list[dict]) -> list[dict]:
    reply = client.chat.completions.create(model=f"engram/{AGENT}", messages=history).choices[0].message.content
    return history + [{"role": "assistant", "content": reply}]


def _settle(mem) -> None:
    """Every policy reaches the head: a policy that fails on an edit's consequences (a chunk left with nothing to
    say re-summarised to an empty memory, refused by the log) would hold its position back for ever."""
    mem.wait_proxy_memory()
    assert mem.wait_idle(timeout=120), mem.rt.progress()


def _recall(mem, query: str, **options):
    return mem.recall(AGENT, t.RecallRequest(query=query, discussion=DISCUSSION, record=False, **options)).hits


@pytest.fixture(scope="module")
def edited(served):
    """A conversation whose first message the front end edits ("blue Volvo" -> "red Volvo") and whose third it
    deletes; answers (mem, when the edit was sent)."""
    import openai

    server, mem = served
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client:
        history = [{"role": "system", "content": f"You are Ada's assistant. {TAG}"}]
        for text in (BLUE, "The car is parked in the garage on Rua Augusta.", VEGETARIAN,
                     "We are planning a road trip to Porto in June."):
            history = _chat(client, history + [{"role": "user", "content": text}])
        _settle(mem)
        before = datetime.now(timezone.utc)
        time.sleep(0.01)
        changed = [dict(m) for m in history]
        changed[1]["content"] = RED  # the edit, as SillyTavern or Open WebUI resends it
        del changed[5:7]  # the vegetarian neighbour and the reply to it, deleted
        _chat(client, changed + [{"role": "user", "content": "Which route along the coast is nicest?"}])
        _settle(mem)
    return mem, before


def test_an_edit_resent_by_a_front_end_makes_recall_answer_the_new_words_and_supersedes_the_old(edited):
    mem, before = edited
    now = _recall(mem, "What colour is the Volvo I drive?")
    assert "red Volvo" in now[0].content
    assert not any("blue" in h.content for h in now)
    then = _recall(mem, "What colour is the Volvo I drive?", as_of=before)
    old = next(h for h in then if "blue Volvo" in h.content)
    assert old.via == "superseded" and old.superseded_by.startswith("edit of message ")
    assert _utc(old.valid_to) > before and not any("red" in h.content for h in then)


def test_the_log_holds_the_edit_pointing_at_the_message_with_the_old_words_kept_for_replay(edited):
    mem, _ = edited
    _, appended = mem.sql("SELECT message_id, content FROM ev_message_appended WHERE stream = ? ORDER BY seq",
                          [DISCUSSION])
    _, edits = mem.sql("SELECT message_id, content, source FROM ev_message_edited WHERE stream = ?", [DISCUSSION])
    _, removed = mem.sql("SELECT message_id FROM ev_message_removed WHERE stream = ? ORDER BY seq", [DISCUSSION])
    blue_id = next(mid for mid, content in appended if content == BLUE)  # the old words stay in the log
    assert edits == [(blue_id, RED, "openai proxy")]
    vegetarian_id = next(mid for mid, content in appended if content == VEGETARIAN)
    assert [r[0] for r in removed][0] == vegetarian_id and len(removed) == 2  # the message and its reply
    _, conversation = mem.sql("SELECT content FROM messages WHERE discussion_id = ? ORDER BY seq", [DISCUSSION])
    said = [c for (c,) in conversation]
    assert said[0] == RED and BLUE not in said and VEGETARIAN not in said
    assert [c for c in said if c.startswith("I drive")] == [RED]  # the edit was not appended as a new message


def test_a_removed_message_leaves_no_current_memory_and_chunk_memories_are_said_again(edited):
    mem, _ = edited
    assert not any("Oskar" in h.content for h in _recall(mem, "Is my neighbour Oskar vegetarian?"))
    summaries = [m.summary for m in mem.memories(AGENT, DISCUSSION).memories]
    assert summaries and not any("blue" in s for s in summaries) and not any("Oskar" in s for s in summaries)
    _, rolling = mem.sql("SELECT summary FROM discussion_summaries WHERE discussion_id = ?", [DISCUSSION])
    assert rolling and "red Volvo" in rolling[0][0] and "blue" not in rolling[0][0] and "Oskar" not in rolling[0][0]
    _, vectors = mem.sql("SELECT summary, title, array_to_string(key_phrases, ';') FROM vector_memories "
                         "WHERE discussion_id = ?", [DISCUSSION])
    assert vectors and not any("blue" in v.lower() or "Oskar" in v for row in vectors for v in row)


TART = "Ines told me her favourite cake is a fig tart with goat cheese."


@pytest.fixture(scope="module")
def swiped(served):
    """A front end regenerates a reply, then swipes back to it and goes on (the openai SDK): answers (mem, the
    reply's message id as first appended)."""
    import openai

    server, mem = served
    discussion = "swipes"
    tag = f"[DiscussionId]{discussion}[/DiscussionId]"
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client:
        start = [{"role": "system", "content": f"You are Ada's assistant. {tag}"},
                 {"role": "user", "content": "My sister Ines loves figs and goat cheese."},
                 {"role": "assistant", "content": "Good to know, I will remember that."},
                 {"role": "user", "content": "What should I make for her birthday?"}]
        history = _chat(client, start + [{"role": "assistant", "content": TART},
                                         {"role": "user", "content": "Thanks."}])
        _settle(mem)
        _, rows = mem.sql("SELECT message_id FROM ev_message_appended WHERE stream = ? AND content = ?", [discussion, TART])
        tart_id = rows[0][0]
        regenerated = _chat(client, start)  # the tart reply regenerated: it and the reply after it are dropped
        _settle(mem)
        _, now = mem.sql("SELECT content FROM messages WHERE discussion_id = ? ORDER BY seq", [discussion])
        assert TART not in [c for (c,) in now]
        assert regenerated[-1]["content"] != TART
        # Swiped back to the first reply, and the next turn.
        _chat(client, history[:5] + [{"role": "user", "content": "She also likes walnuts."}])
        _settle(mem)
    return mem, discussion, tart_id


def test_a_reply_swiped_back_to_after_a_regenerate_is_current_again_with_its_memory(swiped):
    mem, discussion, tart_id = swiped
    _, now = mem.sql("SELECT message_id, role, content FROM messages WHERE discussion_id = ? ORDER BY seq", [discussion])
    said = [c for _, _, c in now]
    assert (tart_id, "assistant", TART) in now  # the reply the front end shows, under its first id
    assert said.count(TART) == 1 and said[-2] == "She also likes walnuts."
    assert [r for _, r, _ in now[:5]] == ["user", "assistant", "user", "assistant", "user"]  # the regenerated one left
    _, restores = mem.sql("SELECT event_id FROM ev_message_edited WHERE stream = ? AND message_id = ?",
                          [discussion, tart_id])
    assert len(restores) == 1 and restores[0][0].startswith(f"restored:{tart_id}:")
    # Its memory is current again: the fact it states (made again from it when it came back), and its chunk memory.
    hits = mem.recall(AGENT, t.RecallRequest(query="What is Ines's favourite cake?", discussion=discussion,
                                             record=False)).hits
    tart = [h for h in hits if "fig tart" in h.content]
    assert tart and tart[0].via != "superseded" and not tart[0].superseded_by
    _, traces = mem.sql("SELECT count(*) FILTER (WHERE active), count(*) FILTER (WHERE superseded_by LIKE 'removal%') "
                        "FROM memory_traces WHERE stream = ? AND content LIKE '%fig tart%'", [discussion])
    assert traces == [(1, 1)]  # the fact of the first words closed at the removal, made again at the swipe back
    assert any("fig tart" in m.summary for m in mem.memories(AGENT, discussion).memories)


def test_replay_after_the_edits_is_identical(edited, swiped):
    mem, _ = edited
    job = mem.replay(t.ReplayRequest(verify=True))
    done = mem.jobs.wait(job.id, timeout=300)
    assert done.state == "succeeded", done.error
    assert done.result["differences"] == [], done.result


def test_a_message_edited_and_removed_through_rest_and_another_agents_key_refused_without_names(served, edited):
    import httpx

    from engram.api.access import Principal

    server, _ = served
    mem, _ = edited
    mem.append_messages("bob", "bobs-diary", t.AppendRequest(messages=[
        t.Message(role="user", content="My secret code is 4471.", message_id="bob-1")]))
    _, rows = mem.sql("SELECT message_id FROM messages WHERE discussion_id = ? AND role = 'user' ORDER BY seq",
                      [DISCUSSION])
    last = rows[-1][0]
    url = f"{server.url}/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages/{last}"
    changed = httpx.patch(url, json={"content": "Which route inland is nicest?"})
    assert changed.status_code == 200, changed.text
    assert changed.json()["change"] == "edited" and changed.json()["content"] == "Which route inland is nicest?"
    alice = mem.scoped(Principal("alice's key", frozenset({AGENT})))
    assert alice.remove_message(AGENT, DISCUSSION, last).change == "removed"
    assert httpx.delete(url).status_code == 404  # removed already: no longer in the conversation
    with pytest.raises(ApiError) as missing:
        alice.edit_message(AGENT, DISCUSSION, last, t.MessageEdit(content="again"))
    assert missing.value.code == "not_found"  # removed: no longer in the conversation
    for agent, discussion in (("bob", "bobs-diary"), (AGENT, "bobs-diary")):
        refusals = []
        for who, where in ((agent, discussion), (agent.replace("bob", "zed"), discussion.replace("bob", "zed"))):
            with pytest.raises(ApiError) as refused:
                alice.edit_message(who, where, "bob-1", t.MessageEdit(content="My code is 0000."))
            refusals.append((refused.value.status, refused.value.code, refused.value.message.replace("bob", "zed")))
        assert refusals[0] == refusals[1]  # exactly what an agent or discussion that does not exist gets
        assert "4471" not in refusals[0][2]
    _, bobs = mem.sql("SELECT content FROM messages WHERE discussion_id = 'bobs-diary'")
    assert bobs == [("My secret code is 4471.",)]


def test_an_edit_over_the_message_limit_is_refused_and_records_nothing(served):
    """A resent history whose earlier message was edited into more than `limits.maxMessageChars` characters is
    refused as a new message of that size is (422), before anything is appended: no edit, no new turn."""
    import openai

    server, mem = served
    discussion = "limits"
    tag = f"[DiscussionId]{discussion}[/DiscussionId]"
    with openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client:
        history = _chat(client, [{"role": "system", "content": f"You are Ada's assistant. {tag}"},
                                 {"role": "user", "content": "My bike is green."}])
        _settle(mem)
        _, before = mem.sql("SELECT count(*) FROM events WHERE stream = ?", [discussion])
        huge = "x" * (mem.rt.config.limits.max_message_chars + 1)
        edited = [history[0], {"role": "user", "content": huge}, history[2], {"role": "user", "content": "And?"}]
        with pytest.raises(openai.UnprocessableEntityError) as refused:
            client.chat.completions.create(model=f"engram/{AGENT}", messages=edited)
    assert "limits.maxMessageChars" in str(refused.value)
    _, after = mem.sql("SELECT count(*) FROM events WHERE stream = ?", [discussion])
    assert after == before

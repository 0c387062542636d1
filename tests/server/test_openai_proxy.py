"""The OpenAI-compatible memory proxy, driven by the official `openai` SDK over real HTTP on loopback.

The app is served from the test process over the in-process runtime (real DuckDB, the real policies and
embedder, no Ray). The LLM is the anthropic provider — the real `anthropic` SDK — pointed at a local fake
Messages API that records every request, so the tests read exactly what the model saw.
"""

from __future__ import annotations

import itertools
import json

import pytest
from tests.providers.llm.fake_messages_api import FakeMessagesApi

AGENT = "ada"
DISCUSSION = "trip-planning"
TAG = f"[DiscussionId]{DISCUSSION}[/DiscussionId]"
PERSONA = "You are Ada's travel assistant."
MEMORY_MARK = "[Memory]"  # the shipped proxy workflow's block in the system prompt
# Small chunks so that a few turns make chunk memories (WilmerAI's settings file, in the home).
DISCUSSION_SETTINGS = {"chunkEstimatedTokenSize": 40, "maxMessagesBetweenChunks": 4, "lookbackStartTurn": 0}


_replies = itertools.count(1)


def reply_to(body: dict) -> str:
    """The fake model: a chat reply when it is asked by the proxy (numbered: a regenerated reply differs), a short
    summary for memory tasks."""
    system = body["system"][0]["text"]
    if MEMORY_MARK in system:
        last = body["messages"][-1]["content"]
        return f"Noted ({next(_replies)}): {last[-60:]}"
    return "Ada is planning a trip to Lisbon in May with her sister Ines."


def proxy_requests(fake: FakeMessagesApi) -> list[dict]:
    return [r for r in fake.requests if MEMORY_MARK in r["system"][0]["text"]]


@pytest.fixture
def proxy(tmp_path, monkeypatch):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    fake = FakeMessagesApi().start()
    fake.answer = reply_to
    monkeypatch.setenv("ENGRAM_TEST_LLM_KEY", "test-key")
    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"llm": {"provider": "anthropic", "endpoints": {"default": {
        "baseUrl": fake.url, "apiKeyEnv": "ENGRAM_TEST_LLM_KEY", "maxRetries": 0, "timeoutSeconds": 5}}}}))
    (home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(DISCUSSION_SETTINGS))
    mem = Engram(InProcessRuntime(load_service_config(home), groups=["summarizer", "traces"]).start())
    try:
        with Served(mem) as server:
            yield server, mem, fake
    finally:
        mem.close()
        fake.stop()


def openai_client(server, **kw):
    import openai

    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=kw.pop("api_key", "unused-without-keys"), max_retries=0,
                         **kw)


def logged(mem, discussion: str = DISCUSSION) -> list[tuple[str, str]]:
    _, rows = mem.sql("SELECT role, content FROM messages WHERE discussion_id = ? ORDER BY seq", [discussion])
    return [tuple(r) for r in rows]


USER_TURNS = [
    "I'm planning a trip to Lisbon in May with my sister Ines.",
    "We want a hotel near Alfama, with a view of the river.",
    "Ines is vegetarian, so restaurants matter a lot.",
    "We land on the 3rd and fly back on the 10th.",
    "Which neighbourhood did I want the hotel in?",
]


def converse(client, *, stream: bool, turns=USER_TURNS, history: list[dict] | None = None) -> list[dict]:
    """A front-end's conversation: the whole history (system prompt with the tag first) resent every turn."""
    history = list(history or [{"role": "system", "content": f"{PERSONA} {TAG}"}])
    for text in turns:
        history.append({"role": "user", "content": text})
        if stream:
            parts = list(client.chat.completions.create(model=f"engram/{AGENT}", messages=history, stream=True))
            assert parts[0].object == "chat.completion.chunk" and parts[0].choices[0].delta.role == "assistant"
            assert parts[-1].choices[0].finish_reason == "stop"
            reply = "".join(p.choices[0].delta.content or "" for p in parts)
        else:
            done = client.chat.completions.create(model=f"engram/{AGENT}", messages=history)
            assert done.object == "chat.completion" and done.choices[0].finish_reason == "stop"
            reply = done.choices[0].message.content
        history.append({"role": "assistant", "content": reply})
    return history


@pytest.mark.parametrize("stream", [False, True], ids=["non-streaming", "streaming"])
def test_a_front_end_resending_the_whole_history_gets_each_message_logged_exactly_once(proxy, stream):
    server, mem, fake = proxy
    with openai_client(server) as client:
        history = converse(client, stream=stream)
    expected = [(m["role"], m["content"]) for m in history if m["role"] != "system"]
    assert logged(mem) == expected  # every user turn and every reply, once, in order; no system prompt, no tag
    assert all(TAG not in content for _, content in logged(mem))
    # No model ever saw the tag.
    assert not any(DISCUSSION in json.dumps(r) and TAG in json.dumps(r) for r in fake.requests)


def test_the_discussions_memories_reach_a_later_turns_system_prompt(proxy):
    server, mem, fake = proxy
    with openai_client(server) as client:
        history = converse(client, stream=False, turns=USER_TURNS[:4])
        mem.wait_proxy_memory()
        mem.wait_idle(timeout=120)
        memories = mem.memories(AGENT, DISCUSSION)
        assert memories.total >= 1  # chunk memories were made from the conversation
        history = converse(client, stream=False, turns=USER_TURNS[4:], history=history)
    last_seen = proxy_requests(fake)[-1]
    system = last_seen["system"][0]["text"]
    assert system.startswith(PERSONA)  # the front-end's own system prompt first, its tag stripped
    assert TAG not in system
    assert memories.memories[-1].summary in system  # the memory the discussion has, injected
    assert last_seen["messages"][-1]["content"].endswith(USER_TURNS[4])
    assert [c for _, c in logged(mem)].count(USER_TURNS[4]) == 1
    assert len(logged(mem)) == len([m for m in history if m["role"] != "system"])


def test_a_cut_an_edited_and_a_regenerated_history_append_only_what_is_new(proxy):
    server, mem, _ = proxy
    with openai_client(server) as client:
        history = converse(client, stream=False, turns=USER_TURNS[:3])
        before = logged(mem)
        # Regenerate: the last reply dropped, nothing new: the new reply is appended, the dropped one removed from the
        # conversation (the log keeps it, `MessageRemoved` says so).
        again = client.chat.completions.create(model=f"engram/{AGENT}", messages=history[:-1])
        assert logged(mem) == before[:-1] + [("assistant", again.choices[0].message.content)]
        _, kept = mem.sql("SELECT count(*) FROM ev_message_appended WHERE stream = ?", [DISCUSSION])
        assert kept[0][0] == len(before) + 1
        # The history cut to its last two messages, plus "ok" twice: both are new, the cut part is not re-appended.
        cut = [{"role": "system", "content": TAG}] + history[-2:] + [{"role": "user", "content": "ok"}]
        reply = client.chat.completions.create(model=f"engram/{AGENT}", messages=cut).choices[0].message.content
        cut += [{"role": "assistant", "content": reply}, {"role": "user", "content": "ok"}]
        client.chat.completions.create(model=f"engram/{AGENT}", messages=cut)
        roles_contents = logged(mem)
        assert [c for r, c in roles_contents if r == "user"].count("ok") == 2
        assert [c for _, c in roles_contents].count(USER_TURNS[0]) == 1
        # An earlier message edited (and the history resent as it was then): the logged message says the edited
        # text in its place, nothing is appended for it; the turns after the resent history were dropped.
        edited = [dict(m) for m in history]
        edited[1]["content"] = USER_TURNS[0].replace("May", "June")
        n = len(logged(mem))
        client.chat.completions.create(model=f"engram/{AGENT}", messages=edited)
        now = logged(mem)
        assert now[0] == ("user", edited[1]["content"]) and USER_TURNS[0] not in [c for _, c in now]
        assert [c for _, c in now].count(edited[1]["content"]) == 1 and "ok" not in [c for _, c in now]
        assert len(now) < n + 1 and now[-1][0] == "assistant"


def test_without_a_tag_the_request_is_answered_without_memory_and_nothing_is_logged(proxy):
    server, mem, fake = proxy
    with openai_client(server) as client:
        done = client.chat.completions.create(model="gpt-4o", messages=[
            {"role": "system", "content": PERSONA}, {"role": "user", "content": "Say hello."}])
    assert done.choices[0].message.content  # the configured LLM answered
    assert fake.requests[-1]["system"][0]["text"] == PERSONA  # forwarded as sent: no memory injected
    assert mem.rt.heads() == {0: 0} or sum(mem.rt.heads().values()) == 0


def test_an_llm_outage_answers_503_with_the_cause_and_the_message_stays_in_the_log(proxy):
    import openai

    server, mem, fake = proxy
    fake.then(529).then(529)
    with openai_client(server) as client:
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model=f"engram/{AGENT}", messages=[
                {"role": "user", "content": f"{TAG} Remember that Ines is vegetarian."}])
    assert err.value.status_code == 503
    body = err.value.response.json()["error"]
    assert body["code"] == "llm_unavailable" and "529" in body["message"]
    assert logged(mem) == [("user", "Remember that Ines is vegetarian.")]


def test_models_lists_one_model_per_agent(proxy):
    server, mem, _ = proxy
    with openai_client(server) as client:
        converse(client, stream=False, turns=USER_TURNS[:1])
        ids = [m.id for m in client.models.list().data]
    assert ids[0] == "engram" and f"engram/{AGENT}" in ids


def test_the_openai_sdk_gets_memory_from_engram_serve_as_a_user_starts_it(tmp_path):
    """`engram serve` as its own process (the in-process runtime, so no Ray; the labelled offline responder)."""
    import subprocess
    import sys
    import time
    from pathlib import Path

    from engram.client import Client

    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"llm": {"provider": "offline"}, "server": {"runtime": "inprocess"}}))
    engram = str(Path(sys.executable).with_name("engram"))
    proc = subprocess.Popen([engram, "--home", str(home), "serve"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while not (home / "instance.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
            time.sleep(0.1)
        info = json.loads((home / "instance.json").read_text())
        with openai_client(type("S", (), {"url": info["url"]})) as llm:
            history = converse(llm, stream=True, turns=USER_TURNS[:2])
            history = converse(llm, stream=False, turns=USER_TURNS[2:3], history=history)
        with Client(info["url"]) as mem:
            rows = mem.sql("SELECT role, content FROM messages WHERE discussion_id = ? ORDER BY seq", [DISCUSSION]).rows
        assert [tuple(r) for r in rows] == [(m["role"], m["content"]) for m in history if m["role"] != "system"]
        assert all("offline" in m["content"].lower() for m in history if m["role"] == "assistant")  # labelled
    finally:
        subprocess.run([engram, "--home", str(home), "down"], capture_output=True, timeout=120)
        out = proc.communicate(timeout=60)[0]
    assert "no API key configured: listening on loopback only" in out


# ---------------------------------------------------------------------------------------------- streaming

LONG_REPLY = ("Lisbon in May is lovely: stay in Alfama for the river views, take tram 28 early, and book the "
              "vegetarian tasting menu at Ao 26 for Ines. ") * 3


def _stream_threads_done(timeout: float = 30.0) -> bool:
    """Whether the proxy's streamed completions (worker threads of the server in this process) have ended."""
    import threading
    import time

    deadline = time.monotonic() + timeout
    while any(th.name == "proxy-stream" for th in threading.enumerate()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_streamed_reply_reaches_the_client_token_by_token_while_the_model_is_still_writing(proxy):
    import threading

    server, mem, fake = proxy
    fake.then(text=LONG_REPLY)
    client_saw_text = threading.Event()
    held = []

    def hold_after_first_word(n: int) -> None:
        if n == 1:  # the model sends no more until the client has the first word (or 10 s pass: not streamed)
            held.append(client_saw_text.wait(10))

    fake.after_delta = hold_after_first_word
    question = f"{TAG} Plan three days in Lisbon for Ines and me."
    with openai_client(server) as client:
        parts = []
        for part in client.chat.completions.create(model=f"engram/{AGENT}", stream=True,
                                                   messages=[{"role": "user", "content": question}]):
            parts.append(part)
            if part.choices and part.choices[0].delta.content:
                client_saw_text.set()
    assert held == [True]  # the first words arrived while the model was still holding the rest back
    texts = [p.choices[0].delta.content for p in parts if p.choices and p.choices[0].delta.content]
    assert len(texts) > 5 and parts[-1].choices[0].finish_reason == "stop"
    assert "".join(texts) == LONG_REPLY.strip()
    assert logged(mem) == [("user", "Plan three days in Lisbon for Ines and me."), ("assistant", LONG_REPLY.strip())]
    # Without a tag the model's tokens are streamed the same way, and nothing is logged.
    fake.after_delta = lambda n: None
    fake.then(text=LONG_REPLY)
    with openai_client(server) as client:
        parts = list(client.chat.completions.create(model="gpt-4o", stream=True,
                                                    messages=[{"role": "user", "content": "Plan a day in Porto."}]))
    assert "".join(p.choices[0].delta.content or "" for p in parts if p.choices) == LONG_REPLY.strip()
    assert fake.requests[-1]["stream"] is True and len(logged(mem)) == 2


def test_a_streamed_reply_carries_the_timings_to_its_first_byte_in_headers_and_the_whole_ones_at_its_end(proxy):
    import threading
    import time

    import httpx

    server, mem, fake = proxy
    fake.then(text=LONG_REPLY)
    client_saw_text = threading.Event()

    def hold_after_first_word(n: int) -> None:
        if n == 1:  # the model keeps writing for 0.3 s more after the client has its first word (and the headers)
            client_saw_text.wait(10)
            time.sleep(0.3)

    fake.after_delta = hold_after_first_word
    body = {"model": f"engram/{AGENT}", "stream": True,
            "messages": [{"role": "user", "content": f"{TAG} Plan three days in Lisbon."}]}
    lines = []
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body, timeout=30) as resp:
        headers = resp.headers
        for line in resp.iter_lines():
            lines.append(line)
            if '"content":"Lisbon' in line.replace(" ", ""):
                client_saw_text.set()
    assert resp.status_code == 200 and headers["X-Engram-Timing"] == "first-byte"
    first_memory, first_llm = float(headers["X-Engram-Memory-Ms"]), float(headers["X-Engram-Llm-Ms"])
    assert first_memory > 0 and first_llm > 0
    comments = [line for line in lines if line.startswith(": engram-timings ")]
    assert len(comments) == 1 and lines.index(comments[0]) < lines.index("data: [DONE]")
    whole = json.loads(comments[0][len(": engram-timings "):])
    assert whole["responder"].startswith("anthropic/")
    # The model's time in the headers ended with its first word; the whole request's has the 0.3 s it wrote after.
    assert whole["llm_ms"] >= first_llm + 300
    assert whole["memory_ms"] >= first_memory  # engram's work before the first byte, then the reply's append
    assert logged(mem) == [("user", "Plan three days in Lisbon."), ("assistant", LONG_REPLY.strip())]
    _, rows = mem.sql("SELECT seq FROM messages WHERE discussion_id = ? ORDER BY seq", [DISCUSSION])
    assert whole["position"] == f"{mem.rt.shard_of(AGENT)}:{rows[-1][0]}"  # the stream's: the reply recorded last


def test_a_model_error_mid_stream_ends_the_stream_with_an_openai_error_and_keeps_the_users_message(proxy):
    import openai

    server, mem, fake = proxy
    fake.then(text=LONG_REPLY, fail_after=4)
    seen = []
    with openai_client(server) as client:
        with pytest.raises(openai.APIError) as err:
            for part in client.chat.completions.create(model=f"engram/{AGENT}", stream=True, messages=[
                    {"role": "user", "content": f"{TAG} Remember that Ines is vegetarian."}]):
                seen.append(part.choices[0].delta.content or "")
    assert "".join(seen) == "Lisbon in May is"  # the four words the model produced before its error
    assert err.value.body["code"] == "llm_unavailable" and err.value.body["type"] == "server_error"
    assert "overloaded" in err.value.message.lower()
    assert _stream_threads_done()
    assert logged(mem) == [("user", "Remember that Ines is vegetarian.")]  # the cut reply is not logged


def test_a_client_that_disconnects_mid_stream_stops_the_model_and_its_cut_reply_is_not_logged(proxy):
    import threading
    import time

    server, mem, fake = proxy
    fake.then(text=LONG_REPLY)
    client_left = threading.Event()
    words = len(LONG_REPLY.split())

    def slowly(n: int) -> None:
        if n == 1:
            client_left.wait(10)
        time.sleep(0.05)

    fake.after_delta = slowly
    with openai_client(server) as client:
        stream = client.chat.completions.create(model=f"engram/{AGENT}", stream=True, messages=[
            {"role": "user", "content": f"{TAG} Plan three days in Lisbon."}])
        for part in stream:
            if part.choices and part.choices[0].delta.content:
                break
        stream.close()
        client_left.set()
        assert _stream_threads_done()
    assert fake.streamed_deltas < words  # the model's call was stopped, not read to its end
    assert logged(mem) == [("user", "Plan three days in Lisbon.")]
    # The front-end resends what it kept of the cut reply with its next turn: it is logged then, once.
    with openai_client(server) as client:
        fake.after_delta = lambda n: None
        client.chat.completions.create(model=f"engram/{AGENT}", messages=[
            {"role": "user", "content": f"{TAG} Plan three days in Lisbon."},
            {"role": "assistant", "content": "Lisbon in May"}, {"role": "user", "content": "Go on."}])
    assert [r for r, _ in logged(mem)] == ["user", "assistant", "user", "assistant"]
    assert logged(mem)[1] == ("assistant", "Lisbon in May")


# ---------------------------------------------------------------------------------------------- several replicas

def test_with_two_server_replicas_a_history_resent_after_a_forget_through_the_other_is_logged_exactly_once(
        proxy, tmp_path, monkeypatch):
    """Two servers over one log, as Ray Serve replicas are: each keeps its own view of the discussion's tail."""
    from engram.boot.embedded import Engram
    from tests.server.helpers import Served

    server, mem, _ = proxy
    # Two APIs append to the log: neither runtime is its sole writer (as Ray Serve replicas' runtimes say).
    monkeypatch.setattr(type(mem.rt), "sole_writer", property(lambda self: False))
    (tmp_path / "replica").mkdir()
    replica = Engram(mem.rt)  # a second API over the same runtime: its own proxy state, the same log
    try:
        with Served(replica, tmp_path / "replica") as second, openai_client(server) as first_client:
            history = converse(first_client, stream=False, turns=USER_TURNS[:2])
            mem.wait_proxy_memory()
            assert len(logged(mem)) == 4
            with second.client() as admin:
                job = admin.forget(AGENT, DISCUSSION, reason="the user asked")
                assert admin.wait_job(job.id, timeout=120).state == "succeeded"
            assert logged(mem) == []
            # The front-end still shows the whole conversation and resends it, through the first replica.
            history = converse(first_client, stream=False, turns=USER_TURNS[2:3], history=history)
            mem.wait_proxy_memory()
            replica.wait_proxy_memory()
        assert logged(mem) == [(m["role"], m["content"]) for m in history if m["role"] != "system"]
    finally:
        replica.wait_proxy_memory()
        replica.jobs.close()


# ---------------------------------------------------------------------------------------------- refusals

def test_every_refused_proxy_request_is_an_openai_error_object_the_sdk_reads(proxy):
    """What an `openai` SDK user catches: the SDK's exception for the status, with engram's code and OpenAI's type."""
    import httpx
    import openai

    from tests.server.helpers import Served

    server, mem, fake = proxy
    with openai_client(server) as client:
        with pytest.raises(openai.UnprocessableEntityError) as err:
            client.chat.completions.create(model=f"engram/{AGENT}", messages=[])
        assert (err.value.code, err.value.type) == ("malformed_messages", "invalid_request_error")
        assert "messages is empty" in err.value.message
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model="engram/no such agent!", messages=[{"role": "user", "content": "hi"}])
        assert (err.value.code, err.value.type) == ("invalid_id", "invalid_request_error")
        with pytest.raises(openai.UnprocessableEntityError) as err:
            client.chat.completions.create(model=f"engram/{AGENT}", messages=[{"role": "robot", "content": "hi"}])
        assert err.value.code == "malformed_messages" and "'robot'" in err.value.message
        fake.then(529)  # the LLM is overloaded before the first token: a plain 503, streaming or not
        with pytest.raises(openai.InternalServerError) as err:
            list(client.chat.completions.create(model=f"engram/{AGENT}", stream=True, messages=[
                {"role": "user", "content": f"{TAG} Ines lands on the 3rd."}]))
        assert err.value.status_code == 503 and (err.value.code, err.value.type) == ("llm_unavailable", "server_error")
    assert logged(mem) == [("user", "Ines lands on the 3rd.")]  # the user's message is in the log
    # A body that is not JSON, or has no messages (what the SDK will not send, other clients do).
    for raw in (b"{not json", b'{"model": "engram"}'):
        answer = httpx.post(f"{server.url}/v1/chat/completions", content=raw, headers={"Content-Type": "application/json"})
        error = answer.json()["error"]
        assert answer.status_code == 422 and error["code"] == "invalid_request" and error["type"] == "invalid_request_error"
        assert error["message"]
    # A body over the server's limit.
    with Served(mem, max_body_bytes=4096) as small, openai_client(small) as client:
        with pytest.raises(openai.APIStatusError) as err:
            client.chat.completions.create(model=f"engram/{AGENT}", messages=[
                {"role": "user", "content": f"{TAG} " + "very long " * 1000}])
        assert err.value.status_code == 413 and err.value.code == "body_too_large"
    assert logged(mem) == [("user", "Ines lands on the 3rd.")]  # nothing refused was appended


def test_a_proxied_completion_answers_the_position_of_what_it_recorded_and_a_read_after_it_sees_it(proxy):
    """Read your writes through the proxy: the `openai` SDK's raw response carries `X-Engram-Position`, the token
    REST's writes answer with; a read passing it as `after` sees the turn (the reply included) at once."""
    import httpx

    server, mem, _ = proxy
    with openai_client(server) as client:
        raw = client.chat.completions.with_raw_response.create(model=f"engram/{AGENT}", messages=[
            {"role": "system", "content": f"{PERSONA} {TAG}"}, {"role": "user", "content": USER_TURNS[0]}])
        reply = raw.parse().choices[0].message.content
        position = raw.headers["X-Engram-Position"]
        untagged = client.chat.completions.with_raw_response.create(
            model=f"engram/{AGENT}", messages=[{"role": "user", "content": "Hello there."}])
    assert "X-Engram-Position" not in untagged.headers  # no memory, nothing recorded: no position
    _, rows = mem.sql("SELECT seq FROM messages WHERE discussion_id = ? AND role = 'assistant'", [DISCUSSION])
    shard = mem.rt.shard_of(AGENT)
    assert position == f"{shard}:{rows[-1][0]}"  # the reply's place in the log, as REST's `position` names it
    page = httpx.get(f"{server.url}/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages",
                     params={"after": position, "order": "newest", "limit": 2}).json()
    assert [(m["role"], m["content"]) for m in page["messages"]] == [("assistant", reply), ("user", USER_TURNS[0])]
    refused = httpx.get(f"{server.url}/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages",
                        params={"after": position + "x"})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_request"

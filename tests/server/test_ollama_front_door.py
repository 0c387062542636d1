"""The Ollama-compatible front door and `/v1/completions` behind engram's keys, driven by the `ollama` Python client.

The app is served over real HTTP on loopback from the test process (the in-process runtime; no LLM is configured,
so replies come from the labelled offline responder, the default). Two keys: one scoped to alice, one to bob. An
Ollama client sends no key unless told to: it sends the key as `Authorization: Bearer`, from its `headers` or from
`OLLAMA_API_KEY`.
"""

from __future__ import annotations

import json

import httpx
import pytest

from tests.server.test_keys import ALICE, ALICE_TALK, BOB, BOB_SECRET, BOB_TALK, call, cli

pytestmark = pytest.mark.server

TAG = "[DiscussionId]alice-ollama[/DiscussionId]"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    from engram.api import types as t
    from tests.server.helpers import served_home

    home = tmp_path_factory.mktemp("ollama-keys") / "home"
    home.mkdir()
    with served_home(home, groups=["summarizer", "traces"]) as mem:
        mem.append_messages(ALICE, ALICE_TALK, t.AppendRequest(messages=[t.Message(role="user", content="Alice likes tea.")]))
        mem.append_messages(BOB, BOB_TALK, t.AppendRequest(messages=[t.Message(role="user", content=BOB_SECRET)]))
        key_a = cli(home, "keys", "add", "--agents", ALICE).splitlines()[0]
        key_b = cli(home, "keys", "add", "--agents", BOB).splitlines()[0]
        url = json.loads((home / "instance.json").read_text())["url"]
        yield mem, home, url, key_a, key_b


def client(url: str, key: str | None = None):
    import ollama

    return ollama.Client(host=url, timeout=120, headers={"Authorization": f"Bearer {key}"} if key else None)


def test_an_ollama_client_without_a_key_is_refused_with_401_in_ollamas_error_shape(keyed, monkeypatch):
    import ollama

    _, home, url, _, _ = keyed
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    for call_it in (lambda c: c.list(), lambda c: c.chat(model="engram", messages=[{"role": "user", "content": "hi"}]),
                    lambda c: c.generate(model="engram", prompt="hi"), lambda c: c.show("engram")):
        with pytest.raises(ollama.ResponseError) as refused:
            call_it(client(url))
        assert refused.value.status_code == 401 and refused.value.error.startswith("this server needs an API key")
    status, doc = call(home, "GET", "/api/version", None)
    assert status == 401 and isinstance(doc["error"], str)  # Ollama's shape: {"error": "<message>"}


def test_a_key_scoped_to_alice_lists_only_alices_model_and_never_bobs_name(keyed):
    _, _, url, key_a, key_b = keyed
    assert [m.model for m in client(url, key_a).list().models] == ["engram:latest", f"engram/{ALICE}:latest"]
    assert [m.model for m in client(url, key_b).list().models] == ["engram:latest", f"engram/{BOB}:latest"]
    assert client(url, key_a).show(f"engram/{ALICE}:latest").details.family == "engram"
    auth = {"Authorization": f"Bearer {key_a}"}
    assert [httpx.head(f"{url}/api/{p}", headers=auth).status_code for p in ("tags", "version")] == [200, 200]
    assert httpx.get(f"{url}/api/version", headers=auth).json() == {"version": "0.12.0"}


def test_a_key_scoped_to_alice_cannot_reach_bob_through_any_ollama_or_text_route(keyed):
    import ollama

    _, home, url, key_a, _ = keyed
    llm = client(url, key_a)
    refusals = []
    for model in (f"engram/{BOB}", "engram/nobody"):
        for call_it in (lambda: llm.chat(model=model, messages=[{"role": "user", "content": f"{BOB_SECRET}?"}]),
                        lambda: llm.generate(model=f"{model}:latest", prompt="what is the locker code?", stream=False),
                        lambda: llm.show(model)):
            with pytest.raises(ollama.ResponseError) as refused:
                call_it()
            refusals.append((refused.value.status_code, refused.value.error.replace(model, "<model>")))
    # bob is answered exactly as an agent that does not exist: nothing tells alice's key that bob is there
    assert refusals[:3] == refusals[3:] and {s for s, _ in refusals} == {404}
    assert all(BOB_SECRET not in e and "4711" not in e for _, e in refusals)
    status, doc = call(home, "POST", "/v1/completions", key_a, {"model": f"engram/{BOB}", "prompt": "hi"})
    assert status == 404 and doc["error"]["code"] == "unknown_agent" and "4711" not in json.dumps(doc)
    status, doc = call(home, "POST", "/api/chat", key_a, {"model": "engram", "messages": [{"role": "user", "content": "x"}],
                                                          "stream": False}, headers={"X-Engram-Agent": BOB})
    assert status == 404 and "4711" not in json.dumps(doc)


def test_an_ollama_client_with_its_key_in_ollama_api_key_gets_memory_in_its_agent(keyed, monkeypatch):
    mem, _, url, key_a, _ = keyed
    monkeypatch.setenv("OLLAMA_API_KEY", key_a)  # what the ollama client (and CLI) send as Authorization: Bearer
    llm = client(url)
    history = [{"role": "system", "content": f"Be kind. {TAG}"}]
    for text, stream in (("I water the plants on Sundays.", False), ("When do I water the plants?", True)):
        history.append({"role": "user", "content": text})
        if stream:
            reply = "".join(p.message.content for p in llm.chat(model="engram", messages=history, stream=True))
        else:
            reply = llm.chat(model="engram", messages=history, stream=False).message.content
        history.append({"role": "assistant", "content": reply})
    _, rows = mem.sql("SELECT role, content FROM messages WHERE agent = ? AND discussion_id = 'alice-ollama' "
                      "ORDER BY seq", [ALICE])
    assert [tuple(r) for r in rows] == [(m["role"], m["content"]) for m in history[1:]]
    assert "offline" in history[-1]["content"].lower()  # no endpoint configured: the labelled offline responder


def test_ollama_routes_refuse_other_origins_and_form_posts_like_every_route(keyed):
    _, _, url, key_a, _ = keyed
    page = httpx.post(f"{url}/api/chat", headers={"Origin": "http://evil.example", "Content-Type": "application/json",
                                                  "Authorization": f"Bearer {key_a}"},
                      content=json.dumps({"model": "engram", "messages": [{"role": "user", "content": "hi"}]}))
    assert page.status_code == 403 and page.json()["error"].startswith("Origin 'http://evil.example'")
    form = httpx.post(f"{url}/api/generate", content=b'{"model": "engram", "prompt": "hi"}',
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415 and isinstance(form.json()["error"], str)
    rebound = httpx.get(f"{url}/api/tags", headers={"Host": "attacker.example", "Authorization": f"Bearer {key_a}"})
    assert rebound.status_code == 403 and isinstance(rebound.json()["error"], str)


def test_malformed_ollama_requests_get_ollamas_errors(keyed):
    _, home, _, key_a, _ = keyed
    cases = [({"messages": [{"role": "user", "content": "hi"}]}, "model is required"),
             ({"model": "engram", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role 'robot'"),
             ({"model": "engram", "messages": [{"role": "user", "content": "hi"}], "options": {"num_predict": "many"}},
              'option "num_predict" must be of type integer'),
             ({"model": "engram", "messages": "hi"}, "Expected `array`")]
    for body, says in cases:
        status, doc = call(home, "POST", "/api/chat", key_a, body)
        assert status == 400 and set(doc) == {"error"} and says in doc["error"], doc
    status, doc = call(home, "POST", "/api/nothing-here", key_a, {})
    assert status == 404 and isinstance(doc["error"], str)


def test_ollama_streams_are_ndjson_with_a_final_done_line(keyed):
    _, _, url, key_a, _ = keyed
    with httpx.stream("POST", f"{url}/api/generate", headers={"Authorization": f"Bearer {key_a}"},
                      json={"model": "engram:latest", "prompt": "Say something about tea."}) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
        lines = [json.loads(x) for x in r.iter_lines() if x]
    assert all(not x["done"] and x["model"] == "engram:latest" and x["created_at"].endswith("Z") for x in lines[:-1])
    last = lines[-1]
    assert last["done"] and last["done_reason"] == "stop" and last["response"] == ""
    assert {"total_duration", "load_duration", "prompt_eval_count", "eval_count", "eval_duration"} <= set(last)
    assert "".join(x["response"] for x in lines)  # the (offline) reply, streamed


def test_openai_text_completions_without_a_tag_answer_and_log_nothing(keyed):
    import openai

    mem, _, url, key_a, _ = keyed
    head = mem.status().shards[0].head
    _, rows = mem.rt.sql("SELECT DISTINCT stream FROM events WHERE seq <= ?", [head])
    before = {s for (s,) in rows}
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key_a, max_retries=0) as llm:
        done = llm.completions.create(model="engram", prompt="Tea is", max_tokens=20)
        parts = list(llm.completions.create(model="engram", prompt="Tea is", max_tokens=20, stream=True))
    assert done.object == "text_completion" and done.choices[0].text
    assert "".join(p.choices[0].text for p in parts) == done.choices[0].text
    # Nothing of these requests was appended (an earlier test's memory making may still append to its own streams).
    _, later = mem.rt.sql("SELECT DISTINCT stream, type FROM events WHERE seq > ?", [head])
    assert not [t for _, t in later if t in ("MessageAppended", "GenerationStarted")], later
    assert {s for s, _ in later} <= before, later


def test_a_text_front_ends_chatml_transcript_through_generate_raw_logs_each_message_once(keyed):
    """SillyTavern's Text Completion (Ollama) mode: the whole chat, formatted, as one raw prompt every turn."""
    mem, _, url, key_a, _ = keyed
    llm = client(url, key_a)
    chat = [("system", "You are Alice's gardener. [DiscussionId]alice-garden[/DiscussionId]")]
    for text in ("The roses need pruning.", "And the tomatoes?", "What needed pruning?"):
        chat.append(("user", text))
        prompt = "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in chat) + "<|im_start|>assistant\n"
        reply = llm.generate(model="engram", prompt=prompt, raw=True, stream=False).response
        chat.append(("assistant", reply))
    _, rows = mem.sql("SELECT role, content FROM messages WHERE discussion_id = 'alice-garden' ORDER BY seq")
    assert [tuple(r) for r in rows] == chat[1:]

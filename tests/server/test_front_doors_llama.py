"""The four front doors of a live `engram serve`, driven by the official clients, with replies from a real model.

One `engram serve` process (in-process runtime) for the module, its `default` endpoint a real llama.cpp server
(llama-cpp-python's `python -m llama_cpp.server` with the tiny GGUF the tests write; nothing is downloaded). The
front-end clients are the official `openai` SDK (`/v1/chat/completions`, `/v1/completions`) and the `ollama`
Python client (`/api/chat`, `/api/generate`). Between engram and the llama.cpp server sits `RecordingRelay`, which
passes every byte through unchanged and records what engram sent and what the model answered, so the tests read
exactly what the model saw (the memory in its prompt, the front end's samplers) and what it said (the replies).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from tests.providers.endpoints.llama_server import LlamaServer

pytestmark = [pytest.mark.server, pytest.mark.llama]

AGENT = "ada"
PERSONA = "You are Ada's travel assistant."
MEMORY_MARK = "[Memory]"  # the shipped proxy workflow's block in the reply's system prompt
# Small chunks so that a few turns make chunk memories (WilmerAI's settings file, in the home).
DISCUSSION_SETTINGS = {"chunkEstimatedTokenSize": 40, "maxMessagesBetweenChunks": 4, "lookbackStartTurn": 0}
TURNS = [
    "I'm planning a trip to Lisbon in May with my sister Ines.",
    "We want a hotel near Alfama, with a view of the river.",
    "Ines is vegetarian, so restaurants matter a lot.",
    "We land on the 3rd and fly back on the 10th.",
    "Which neighbourhood did I want the hotel in?",
]
# The front end's own reply length (the tiny model's random answers run to the limit): the conversation stays
# within the window, and every door's sampler reaches the model.
REPLY_TOKENS = 24
OPTIONS = {"num_predict": REPLY_TOKENS}


def tag(discussion: str) -> str:
    return f"[DiscussionId]{discussion}[/DiscussionId]"


class RecordingRelay:
    """A transparent relay in front of the real llama.cpp server (not a stand-in: every answer is the server's, byte
    for byte, streams passed on as they arrive). It records each request body engram sent and the text the model
    answered, so a test can read what the model saw and said."""

    def __init__(self, upstream: str):
        self.upstream = upstream
        self.calls: list[dict] = []  # {"path", "body", "answer"}
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    def start(self) -> "RecordingRelay":
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the answer ends when the connection closes: streams need no framing here

            def do_GET(self):
                self._relay("GET")

            def do_POST(self):
                self._relay("POST")

            def _relay(self, method: str) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                call = {"path": self.path, "body": json.loads(raw) if raw else None, "answer": None}
                got = bytearray()
                with httpx.stream(method, relay.upstream + self.path, content=raw or None, timeout=120,
                                  headers={"content-type": self.headers.get("content-type", "application/json")}) as r:
                    self.send_response(r.status_code)
                    self.send_header("content-type", r.headers.get("content-type", "application/json"))
                    self.end_headers()
                    for chunk in r.iter_raw():
                        got += chunk
                        self.wfile.write(chunk)
                        self.wfile.flush()
                call["answer"] = answer_text(bytes(got))
                relay.calls.append(call)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def replies(self) -> list[dict]:
        """The calls that made a reply to the user (their system prompt is the proxy workflow's, or none of engram's
        memory tasks')."""
        return [c for c in self.calls if c["path"].endswith("/chat/completions") and MEMORY_MARK in system_of(c)]


def system_of(call: dict) -> str:
    return "\n".join(m["content"] for m in call["body"].get("messages", []) if m["role"] == "system")


def answer_text(raw: bytes) -> str | None:
    """The model's text in an OpenAI answer: one JSON object, or server-sent events of deltas."""
    text = raw.decode(errors="replace").strip()
    if text.startswith("{"):
        doc = json.loads(text)
        choice = (doc.get("choices") or [{}])[0]
        return (choice.get("message") or {}).get("content", choice.get("text"))
    parts = []
    for line in text.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            choice = (json.loads(line[6:]).get("choices") or [{}])[0]
            parts.append((choice.get("delta") or {}).get("content") or choice.get("text") or "")
    return "".join(parts)


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    """(engram's URL, the relay, the llama.cpp server, an engram Client): one llama.cpp server, one `engram serve`."""
    from engram.client import Client
    from tests.server.helpers import ServerProcess

    base = tmp_path_factory.mktemp("front-doors")
    llama = LlamaServer(base, n_ctx=4096).start()
    relay = RecordingRelay(llama.url).start()
    home = base / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"llm": {
        "endpoints": {"default": {"apiType": "openAIChatCompletion", "baseUrl": relay.url, "model": "tiny",
                                  "charsPerToken": 0.7, "maxContextTokens": 4096, "maxRetries": 1,
                                  "timeoutSeconds": 60}},
        "presets": {"default": {"temperature": 0, "maxTokens": 24}}}}))
    (home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(DISCUSSION_SETTINGS))
    try:
        with ServerProcess(home) as server:
            with Client(server.url, timeout=120) as client:
                yield server.url, relay, llama, client
    finally:
        relay.stop()
        llama.stop()


def logged(client, discussion: str) -> list[tuple[str, str]]:
    rows = client.sql("SELECT role, content FROM messages WHERE discussion_id = ? ORDER BY seq", [discussion]).rows
    return [tuple(r) for r in rows]


def wait_for_memories(client, discussion: str, timeout: float = 120) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = client.memories(AGENT, discussion)
        if got.total >= 1:
            return got.memories
        time.sleep(0.2)
    raise AssertionError(f"no memory was made for {discussion} within {timeout}s")


def injected(client, discussion: str, made_before: list[dict], last: dict) -> bool:
    """Whether a chunk memory of the discussion (one existed before the last turn) was in the last reply's system
    prompt (more may have been made since: the recent ones are injected)."""
    assert made_before
    return any(m.summary and m.summary in system_of(last) for m in client.memories(AGENT, discussion).memories)


def from_the_model(relay: RecordingRelay, reply: str) -> bool:
    """Whether `reply` is what the llama.cpp server answered to one of engram's reply calls."""
    return bool(reply) and any((c["answer"] or "").strip() == reply for c in relay.replies())


def check_memory_conversation(client, relay, discussion: str, user_turns: list[str], replies: list[str]) -> None:
    """Each message in the log once and in order; the replies are the model's; the memory made from the first turns
    was in the system prompt the model saw on the last one, and the tag never reached it."""
    expected = [x for pair in zip([("user", u) for u in user_turns], [("assistant", r) for r in replies]) for x in pair]
    assert logged(client, discussion) == expected
    assert all(from_the_model(relay, r) for r in replies), replies
    last = next(c for c in reversed(relay.replies()) if user_turns[-1] in json.dumps(c["body"]))
    assert tag(discussion) not in json.dumps(last["body"])
    assert last["body"]["max_tokens"] == REPLY_TOKENS  # the front end's, not the route's
    return last


def test_openai_chat_completions_multi_turn_with_memory_streamed_and_not(front):
    import openai

    url, relay, _, client = front
    discussion = "door-chat"
    history = [{"role": "system", "content": f"{PERSONA} {tag(discussion)}"}]
    replies = []
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120) as llm:
        for n, text in enumerate(TURNS):
            history.append({"role": "user", "content": text})
            if n % 2:
                parts = list(llm.chat.completions.create(model=f"engram/{AGENT}", messages=history, stream=True,
                                                                max_tokens=REPLY_TOKENS))
                assert parts[-1].choices[0].finish_reason == "stop"
                assert len([p for p in parts if p.choices and p.choices[0].delta.content]) > 1  # token by token
                reply = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
            else:
                done = llm.chat.completions.create(model=f"engram/{AGENT}", messages=history, max_tokens=REPLY_TOKENS)
                reply = done.choices[0].message.content
                assert done.usage.completion_tokens > 0
            history.append({"role": "assistant", "content": reply})
            replies.append(reply)
            if n == 3:
                memories = wait_for_memories(client, discussion)
    last = check_memory_conversation(client, relay, discussion, TURNS, replies)
    assert system_of(last).startswith(PERSONA) and injected(client, discussion, memories, last)


def test_openai_text_completions_multi_turn_with_memory_streamed_and_not(front):
    import openai

    url, relay, _, client = front
    discussion = "door-text"
    replies = []
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120) as llm:
        for n, text in enumerate(TURNS):
            prompt = f"{tag(discussion)} {text}"  # a text front end sends no history: the prompt is the next turn
            if n % 2:
                parts = list(llm.completions.create(model=f"engram/{AGENT}", prompt=prompt, stream=True,
                                                    max_tokens=REPLY_TOKENS))
                assert parts[-1].choices[0].finish_reason == "stop" and len(parts) > 2
                reply = "".join(p.choices[0].text for p in parts if p.choices)
            else:
                done = llm.completions.create(model=f"engram/{AGENT}", prompt=prompt, max_tokens=REPLY_TOKENS)
                assert done.object == "text_completion" and done.choices[0].finish_reason == "stop"
                reply = done.choices[0].text
            replies.append(reply)
            if n == 3:
                memories = wait_for_memories(client, discussion)
    last = check_memory_conversation(client, relay, discussion, TURNS, replies)
    # The model saw only the last prompt as conversation: what it knew of the first turns came from memory.
    assert injected(client, discussion, memories, last)
    assert TURNS[0] not in json.dumps([m for m in last["body"]["messages"] if m["role"] != "system"])


def test_ollama_chat_multi_turn_with_memory_streamed_and_not(front):
    import ollama

    url, relay, _, client = front
    discussion = "door-ollama-chat"
    llm = ollama.Client(host=url, timeout=120)
    history = [{"role": "system", "content": f"{PERSONA} {tag(discussion)}"}]
    replies = []
    for n, text in enumerate(TURNS):
        history.append({"role": "user", "content": text})
        if n % 2:
            parts = list(llm.chat(model=f"engram/{AGENT}:latest", messages=history, stream=True, options=OPTIONS))
            assert parts[-1].done and parts[-1].done_reason == "stop" and not any(p.done for p in parts[:-1])
            assert len([p for p in parts if p.message.content]) > 1  # token by token
            reply = "".join(p.message.content for p in parts)
        else:
            done = llm.chat(model=f"engram/{AGENT}", messages=history, stream=False, options=OPTIONS)
            assert done.done and done.eval_count > 0 and done.total_duration > 0
            reply = done.message.content
        history.append({"role": "assistant", "content": reply})
        replies.append(reply)
        if n == 3:
            memories = wait_for_memories(client, discussion)
    last = check_memory_conversation(client, relay, discussion, TURNS, replies)
    assert system_of(last).startswith(PERSONA) and injected(client, discussion, memories, last)


def test_ollama_generate_multi_turn_with_memory_streamed_and_not(front):
    import ollama

    url, relay, _, client = front
    discussion = "door-ollama-generate"
    llm = ollama.Client(host=url, timeout=120)
    replies = []
    for n, text in enumerate(TURNS):
        prompt = f"{tag(discussion)} {text}"
        if n % 2:
            parts = list(llm.generate(model=f"engram/{AGENT}", prompt=prompt, system=PERSONA, stream=True, options=OPTIONS))
            assert parts[-1].done and len([p for p in parts if p.response]) > 1
            reply = "".join(p.response for p in parts)
        else:
            done = llm.generate(model=f"engram/{AGENT}:latest", prompt=prompt, system=PERSONA, stream=False,
                                options=OPTIONS)
            assert done.done and done.done_reason == "stop"
            reply = done.response
        replies.append(reply)
        if n == 3:
            memories = wait_for_memories(client, discussion)
    last = check_memory_conversation(client, relay, discussion, TURNS, replies)
    assert system_of(last).startswith(PERSONA) and injected(client, discussion, memories, last)
    assert TURNS[0] not in json.dumps([m for m in last["body"]["messages"] if m["role"] != "system"])


def test_the_front_ends_samplers_reach_the_model(front):
    import ollama
    import openai

    url, relay, _, _ = front
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120) as llm:
        llm.chat.completions.create(model="engram", messages=[{"role": "user", "content": "Hi there"}],
                                    temperature=0.3, top_p=0.5, max_tokens=7, stop=["zz"], seed=11)
    sent = relay.calls[-1]["body"]
    assert (sent["temperature"], sent["top_p"], sent["max_tokens"], sent["stop"], sent["seed"]) == (
        0.3, 0.5, 7, ["zz"], 11)
    ollama.Client(host=url, timeout=120).chat(model="engram", messages=[{"role": "user", "content": "Hi"}],
                                              options={"temperature": 0.2, "num_predict": 5, "stop": ["qq"]},
                                              stream=False)
    sent = relay.calls[-1]["body"]
    assert (sent["temperature"], sent["max_tokens"], sent["stop"]) == (0.2, 5, ["qq"])


def test_without_a_tag_the_request_is_forwarded_unchanged_and_nothing_is_logged(front):
    import openai

    url, relay, llama, client = front
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    head = client.status().shards[0].head
    before = {s for (s,) in client.sql("SELECT DISTINCT stream FROM events WHERE seq <= ?", [head]).rows}
    direct = httpx.post(f"{llama.url}/v1/chat/completions", timeout=60, json={
        "model": "tiny", "messages": messages, "temperature": 0, "max_tokens": 9}).json()
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120) as llm:
        done = llm.chat.completions.create(model="engram", messages=messages, temperature=0, max_tokens=9)
        streamed = "".join(p.choices[0].delta.content or "" for p in llm.chat.completions.create(
            model="engram", messages=messages, temperature=0, max_tokens=9, stream=True) if p.choices)
        text = llm.completions.create(model="engram", prompt="Once upon a time", temperature=0, max_tokens=9)
    assert done.choices[0].message.content == streamed == direct["choices"][0]["message"]["content"].strip()
    assert relay.calls[-3]["body"]["messages"] == messages  # the front end's messages, as they came
    assert relay.calls[-1]["body"]["messages"] == [{"role": "user", "content": "Once upon a time"}]
    assert text.choices[0].text == relay.calls[-1]["answer"]  # a continuation is passed on untrimmed
    # Nothing of these requests was appended. The earlier tests' memory making may still append to their own
    # discussions meanwhile (a chunk memory, a summary made by the slow model), so the head itself can move.
    later = client.sql("SELECT DISTINCT stream, type FROM events WHERE seq > ?", [head]).rows
    assert not [t for _, t in later if t in ("MessageAppended", "GenerationStarted")], later
    assert {s for s, _ in later} <= before, later


def test_ollama_tags_version_and_the_load_call_answer_as_ollama_does(front):
    import ollama

    url, _, _, _ = front
    llm = ollama.Client(host=url, timeout=120)
    names = [m.model for m in llm.list().models]
    assert names[0] == "engram:latest" and f"engram/{AGENT}:latest" in names
    assert httpx.get(f"{url}/api/version").json() == {"version": "0.12.0"}
    loaded = httpx.post(f"{url}/api/generate", json={"model": "engram"}).json()
    assert (loaded["done"], loaded["done_reason"], loaded["response"]) == (True, "load", "")


def test_an_ollama_clients_format_is_the_llama_servers_constrained_json(front):
    """Ollama's `format` on a llama.cpp upstream: asked the strongest way the server takes (llama-cpp-python refuses
    `json_schema`, so `json_object` with the schema), the reply the server's grammar-constrained JSON."""
    import ollama

    url, relay, _, _ = front
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    done = ollama.Client(host=url, timeout=120).chat(model="engram", messages=[{"role": "user", "content": "OK?"}],
                                                     format=schema, stream=False)
    sent = relay.calls[-1]["body"]
    assert sent["response_format"] == {"type": "json_object", "schema": schema}
    assert done.message.content == relay.calls[-1]["answer"].strip()
    assert json.loads(done.message.content)["ok"] in (True, False)


def test_an_openai_clients_response_format_is_the_llama_servers_constrained_json_never_dropped(front):
    """OpenAI's `response_format` on the chat door, as the Ollama door's `format`: a json_schema reaches llama.cpp the
    strongest way it takes (`json_object` with the schema) and the reply is its constrained JSON; an unknown kind is
    refused naming the field, before anything is appended."""
    import openai

    url, relay, _, client = front
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120) as llm:
        done = llm.chat.completions.create(model="engram", messages=[{"role": "user", "content": "OK?"}],
                                           response_format={"type": "json_schema",
                                                            "json_schema": {"name": "ok", "schema": schema}})
        sent = relay.calls[-1]["body"]
        assert sent["response_format"] == {"type": "json_object", "schema": schema}
        assert json.loads(done.choices[0].message.content)["ok"] in (True, False)
        llm.chat.completions.create(model="engram", messages=[{"role": "user", "content": "OK?"}],
                                    response_format={"type": "json_object"})
        assert relay.calls[-1]["body"]["response_format"]["type"] == "json_object"
        calls, head = len(relay.calls), client.status().shards[0].head
        with pytest.raises(openai.UnprocessableEntityError) as refused:  # engram's status for an invalid parameter
            llm.chat.completions.create(model="engram", response_format={"type": "yaml"}, messages=[
                {"role": "user", "content": "[DiscussionId]fmt-1[/DiscussionId] OK?"}])
    assert refused.value.body["param"] == "response_format" and len(relay.calls) == calls
    assert not client.sql("SELECT 1 FROM events WHERE seq > ? AND stream = 'fmt-1'", [head]).rows


def test_an_option_a_llama_server_has_no_name_for_is_refused_naming_it(front):
    import ollama

    url, relay, _, _ = front
    calls = len(relay.calls)
    with pytest.raises(ollama.ResponseError) as refused:
        ollama.Client(host=url, timeout=120).chat(model="engram", messages=[{"role": "user", "content": "Hi"}],
                                                  options={"num_gpu": 1}, stream=False)
    assert refused.value.status_code == 400 and refused.value.error.startswith('option "num_gpu"')
    ollama.Client(host=url, timeout=120).chat(model="engram", messages=[{"role": "user", "content": "Hi"}],
                                              options={"repeat_penalty": 1.2, "min_p": 0.1}, stream=False)
    sent = relay.calls[-1]["body"]
    assert (sent["repeat_penalty"], sent["min_p"]) == (1.2, 0.1) and len(relay.calls) == calls + 1

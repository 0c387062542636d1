"""The Ollama door's `format`, `keep_alive`, `options`, `images` and `tools`, driven by the official `ollama` client:
honoured by an Ollama upstream, refused with Ollama's error shape (naming the field) where the reply's upstream
cannot take them, never dropped.

The app is served over real HTTP from the test process (the in-process runtime, no policies). Its `default` endpoint
is the suite's STAND-IN for Ollama's native API (`OllamaStandIn`: strict about formats, durations, base64 images and
option types as Ollama is). The memory workflow's reply node routes to a KoboldCpp endpoint (never called here: what
it cannot do is refused before anything is appended or sent), so a tagged request shows the refusals.
"""

from __future__ import annotations

import base64
import json

import pytest

from tests.providers.endpoints.standins import OllamaStandIn

pytestmark = pytest.mark.server

MODEL = "llama3.1:8b"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city", "days"]}
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(24)).decode()
TAG = "[DiscussionId]kobold-trip[/DiscussionId]"


@pytest.fixture(scope="module")
def door(tmp_path_factory):
    from tests.server.helpers import served_home

    ollama_upstream = OllamaStandIn({MODEL: 8192}).start()
    home = tmp_path_factory.mktemp("ollama-asks") / "home"
    (home / "workflows").mkdir(parents=True)
    (home / "engram.json").write_text(json.dumps({"llm": {"endpoints": {
        "default": {"apiType": "ollamaApiChat", "baseUrl": ollama_upstream.url, "model": MODEL, "maxRetries": 0},
        "kobold": {"apiType": "koboldCppGenerate", "baseUrl": "http://127.0.0.1:9", "maxContextTokens": 4096,
                   "maxRetries": 0}}}}))
    (home / "workflows" / "openai-proxy.json").write_text(json.dumps([
        {"id": "reply", "type": "Standard", "endpointName": "kobold", "returnToUser": True}]))
    try:
        with served_home(home, groups=[]) as mem:
            url = json.loads((home / "instance.json").read_text())["url"]
            yield url, ollama_upstream, mem
    finally:
        ollama_upstream.stop()


def client(url: str):
    import ollama

    return ollama.Client(host=url, timeout=60)


def last_chat(upstream: OllamaStandIn) -> dict:
    return upstream.posts("/api/chat")[-1]


def test_a_json_schema_format_reaches_an_ollama_upstream_and_the_reply_is_its_json(door):
    url, upstream, _ = door
    upstream.then('{"city": "Lisbon", "days": 7}')
    done = client(url).chat(model="engram", messages=[{"role": "user", "content": "Where and how long?"}],
                            format=SCHEMA, stream=False)
    assert json.loads(done.message.content) == {"city": "Lisbon", "days": 7}
    assert last_chat(upstream)["format"] == SCHEMA
    upstream.then('{"ok": true}')
    streamed = "".join(p.response for p in client(url).generate(model="engram", prompt="Answer in JSON.",
                                                                 format="json", stream=True))
    assert json.loads(streamed) == {"ok": True} and last_chat(upstream)["format"] == "json"


def test_keep_alive_and_every_option_reach_an_ollama_upstream(door):
    url, upstream, _ = door
    client(url).chat(model="engram", messages=[{"role": "user", "content": "Hi"}], keep_alive="10m", stream=False,
                     options={"num_ctx": 2048, "repeat_penalty": 1.3, "min_p": 0.05, "num_predict": 9,
                              "temperature": 0.4})
    sent = last_chat(upstream)
    assert sent["keep_alive"] == "10m"
    assert {k: sent["options"][k] for k in ("num_ctx", "repeat_penalty", "min_p", "num_predict", "temperature")} == {
        "num_ctx": 2048, "repeat_penalty": 1.3, "min_p": 0.05, "num_predict": 9, "temperature": 0.4}


def test_images_go_to_an_ollama_upstream_with_the_turn_it_answers(door):
    url, upstream, _ = door
    client(url).chat(model="engram", stream=False, messages=[
        {"role": "user", "content": "What is in this picture?", "images": [PNG]}])
    sent = last_chat(upstream)
    assert sent["messages"][-1]["content"] == "What is in this picture?" and sent["messages"][-1]["images"] == [PNG]
    client(url).generate(model="engram", prompt="Describe it.", images=[PNG], stream=False)
    assert last_chat(upstream)["messages"][-1]["images"] == [PNG]


def test_what_the_replys_upstream_cannot_take_is_refused_naming_the_field_and_nothing_is_appended(door):
    import ollama

    url, upstream, mem = door
    calls = len(upstream.requests)
    head = mem.status().shards[0].head
    asks = [({"images": [PNG]}, '"images"'), ({"options": {"num_gpu": 1}}, 'option "num_gpu"'),
            ({"format": {"type": "object", "properties": {"note": {"type": ["string", "null"]}}}}, '"format"')]
    for extra, named in asks:
        message = {"role": "user", "content": f"{TAG} Plan the trip."}
        if "images" in extra:
            message["images"] = extra["images"]
        kwargs = {k: v for k, v in extra.items() if k != "images"}
        with pytest.raises(ollama.ResponseError) as refused:
            client(url).chat(model="engram", messages=[message], stream=False, **kwargs)
        assert refused.value.status_code == 400 and refused.value.error.startswith(named), refused.value.error
        assert "koboldCppGenerate" in refused.value.error
    with pytest.raises(ollama.ResponseError) as refused:
        client(url).chat(model="engram", messages=[{"role": "user", "content": "Weather?"}], stream=False,
                         tools=[{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}])
    assert refused.value.status_code == 400 and refused.value.error.startswith('"tools"')
    assert len(upstream.requests) == calls and mem.status().shards[0].head == head


WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}}}


def openai_client(url: str):
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused-without-keys", max_retries=0)


def test_both_doors_refuse_tools_naming_the_field_in_their_own_shape_and_append_nothing(door):
    """The OpenAI door took `tools` and answered as if they were not there; now it refuses them as the Ollama door
    does: a 400 in OpenAI's error shape with `param` naming the field, before anything is appended or sent."""
    import ollama
    import openai

    url, upstream, mem = door
    calls, head = len(upstream.requests), mem.status().shards[0].head
    asks = [({"tools": [WEATHER]}, "tools"), ({"tools": [WEATHER], "tool_choice": "auto"}, "tools"),
            ({"tool_choice": "required"}, "tool_choice"),
            ({"tool_choice": {"type": "function", "function": {"name": "weather"}}}, "tool_choice"),
            ({"functions": [WEATHER["function"]]}, "functions"), ({"function_call": {"name": "weather"}}, "function_call")]
    with openai_client(url) as oai:
        for content in (f"{TAG} What is the weather in Lisbon?", "What is the weather in Lisbon?"):
            for extra, field in asks:
                with pytest.raises(openai.BadRequestError) as refused:
                    oai.chat.completions.create(model="engram", messages=[{"role": "user", "content": content}],
                                                **extra)
                err = refused.value
                assert (err.status_code, err.code, err.param, err.type) == (
                    400, "unsupported_field", field, "invalid_request_error"), err.body
                assert err.body["message"].startswith(f'"{field}": engram\'s proxy does not pass tool definitions')
        with pytest.raises(openai.BadRequestError):  # streamed too: refused before the stream starts
            oai.chat.completions.create(model="engram", stream=True, tools=[WEATHER],
                                        messages=[{"role": "user", "content": f"{TAG} Weather?"}])
    with pytest.raises(ollama.ResponseError) as refused:
        client(url).chat(model="engram", messages=[{"role": "user", "content": f"{TAG} Weather?"}], tools=[WEATHER],
                         stream=False)
    assert refused.value.status_code == 400
    assert refused.value.error.startswith('"tools": engram\'s proxy does not pass tool definitions'), refused.value.error
    assert len(upstream.requests) == calls and mem.status().shards[0].head == head


def test_a_request_that_asks_for_no_tool_call_is_answered_by_both_doors(door):
    """No tools and a choice of "none" (what some front ends always send), or an empty tool list, ask for nothing: the
    model answers in text, as it would without the fields."""
    url, upstream, _ = door
    with openai_client(url) as oai:
        for extra in ({"tool_choice": "none"}, {"tools": []}, {"function_call": "none"}):
            reply = oai.chat.completions.create(model="engram", messages=[{"role": "user", "content": "Hello?"}],
                                                **extra)
            assert reply.choices[0].message.content and not reply.choices[0].message.tool_calls
            assert "tools" not in upstream.posts("/api/chat")[-1]
    answered = client(url).chat(model="engram", messages=[{"role": "user", "content": "Hello?"}], tools=[],
                                stream=False)
    assert answered.message.content and not answered.message.tool_calls


def test_a_tool_call_in_the_history_is_refused_by_both_doors_naming_the_message_never_dropped(door):
    """A history whose assistant turn called a tool (from a model engram did not ask for one) cannot be given to the
    model as it was: both doors refuse it naming `messages[i].tool_calls`, and nothing is appended or sent."""
    import ollama
    import openai

    url, upstream, mem = door
    calls, head = len(upstream.requests), mem.status().shards[0].head
    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Lisbon\"}"}}
    history = [{"role": "user", "content": f"{TAG} Weather in Lisbon?"},
               {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "call_1", "content": "22 C and sunny"},
               {"role": "user", "content": "So, a hat?"}]
    with openai_client(url) as oai:
        with pytest.raises(openai.BadRequestError) as refused:
            oai.chat.completions.create(model="engram", messages=history)
    assert (refused.value.status_code, refused.value.param) == (400, "messages[1].tool_calls")
    assert refused.value.body["message"].startswith("messages[1].tool_calls: engram's proxy does not pass tool calls")
    ollama_history = [dict(m, content=m["content"] or "") for m in history]
    ollama_history[1]["tool_calls"] = [{"function": {"name": "weather", "arguments": {"city": "Lisbon"}}}]
    with pytest.raises(ollama.ResponseError) as refused:
        client(url).chat(model="engram", messages=ollama_history, stream=False)
    assert refused.value.status_code == 400 and refused.value.error.startswith("messages[1].tool_calls: ")
    assert len(upstream.requests) == calls and mem.status().shards[0].head == head

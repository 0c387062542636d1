"""How long the proxy's reply may be, against a real llama.cpp server (llama-cpp-python and the tiny test model,
whose random answers run to whatever limit they are given, so the reply's token count IS the limit engram sent).

The rule (README, "Presets"): the front end's max_tokens passes through, else the workflow node's
maxResponseSizeInTokens (400 by default); a preset's `maxTokens`, when set, caps either; with
`frontEndSamplers: "override"` the front end's max_tokens is not used where the preset sets maxTokens.
The proxy runs in-process (the API over the in-process runtime, no policies): only the reply's call is made.
"""

from __future__ import annotations

import json

import pytest

from engram.api import types as t

pytestmark = pytest.mark.llama

AGENT = "ada"
TAG = "[DiscussionId]reply-size[/DiscussionId]"


@pytest.fixture
def proxy(llama, tmp_path, monkeypatch):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = tmp_path / "home"
    (home / "workflows").mkdir(parents=True)
    (home / "engram.json").write_text(json.dumps({"llm": {
        "endpoints": {"default": {"apiType": "openAIChatCompletion", "baseUrl": llama.url, "model": "tiny",
                                  "charsPerToken": 0.7, "maxContextTokens": 2048, "maxRetries": 1}},
        "presets": {"default": {"temperature": 0},
                    "short": {"temperature": 0, "maxTokens": 5},
                    "strict": {"temperature": 0, "maxTokens": 6, "frontEndSamplers": "override"}}}}))
    mem = Engram(InProcessRuntime(load_service_config(home), groups=[]).start())
    try:
        yield mem, home / "workflows" / "openai-proxy.json"
    finally:
        mem.close()


def reply_tokens(proxy, preset: str, text: str, front_end_max: int | None = None) -> int:
    """The reply's length in tokens (as the server counted them) when the workflow's reply node uses `preset`."""
    mem, workflow = proxy
    workflow.write_text(json.dumps([{"id": "reply", "type": "Standard", "preset": preset, "returnToUser": True}]))
    sampling = t.Samplers(max_tokens=front_end_max) if front_end_max else None
    out = mem.complete(AGENT, t.CompletionRequest(messages=[t.ChatTurn(role="system", content=TAG),
                                                            t.ChatTurn(role="user", content=text)],
                                                  max_tokens=front_end_max, sampling=sampling))
    assert out.discussion == "reply-size" and out.reply
    return out.output_tokens


def test_a_presets_max_tokens_caps_the_reply_below_the_nodes_default_size(proxy):
    assert reply_tokens(proxy, "short", "Tell me about Lisbon.") == 5  # not the node's 400


def test_a_presets_max_tokens_caps_the_front_ends_max_tokens_too(proxy):
    assert reply_tokens(proxy, "short", "Tell me about Porto.", front_end_max=40) == 5
    assert reply_tokens(proxy, "short", "Tell me about Braga.", front_end_max=3) == 3  # within the cap: the front end's


def test_a_preset_that_overrides_the_front_end_replaces_its_max_tokens(proxy):
    assert reply_tokens(proxy, "strict", "Tell me about Faro.", front_end_max=40) == 6
    assert reply_tokens(proxy, "strict", "Tell me about Evora.", front_end_max=2) == 6  # the preset's, not the 2


def test_without_a_cap_the_front_ends_max_tokens_passes_through(proxy):
    assert reply_tokens(proxy, "default", "Tell me about Sintra.", front_end_max=9) == 9

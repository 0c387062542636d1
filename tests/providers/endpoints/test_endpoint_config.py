"""Endpoint settings in engram.json: apiType and its keys, typos named, `provider: auto`, what each type sends."""

from __future__ import annotations

import json

import pytest

from engram.config.errors import ConfigError
from engram.config.llm import Endpoint, LlmConfig, Preset, TaskRoute
from engram.config.loader import load
from engram.config.service import ServiceConfig
from engram.providers.endpoints.adapters import ADAPTERS
from engram.providers.endpoints.wire import Request, Sampling
from engram.providers.llm import make_tasks
from engram.providers.llm.endpoint_tasks import EndpointTasks
from engram.providers.llm.inputs import Respond
from engram.providers.llm.pricing import price_of
from engram.providers.llm.routing import select_provider, why_provider
from engram.providers.llm.types import ChatLine


def write(tmp_path, data) -> str:
    path = tmp_path / "engram.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_an_unknown_api_type_is_an_error_naming_the_right_one(tmp_path):
    path = write(tmp_path, {"llm": {"endpoints": {"default": {"apiType": "ollamaChat", "model": "x"}}}})
    with pytest.raises(ConfigError) as err:
        load(ServiceConfig, path)
    assert "unknown apiType 'ollamaChat'" in str(err.value) and "did you mean 'ollamaApiChat'?" in str(err.value)
    assert "llm.endpoints.default.apiType" in str(err.value)


def test_an_unknown_endpoint_key_is_an_error_naming_the_right_one(tmp_path):
    path = write(tmp_path, {"llm": {"endpoints": {"default": {"apiType": "ollamaApiChat", "model": "x",
                                                              "maxConcurentRequests": 2}}}})
    with pytest.raises(ConfigError, match="unknown key 'llm.endpoints.default.maxConcurentRequests'; did you mean "
                                          "'maxConcurrentRequests'"):
        load(ServiceConfig, path)


def test_a_wilmerai_window_key_reads_and_other_wrong_values_are_named(tmp_path):
    config = load(ServiceConfig, write(tmp_path, {"llm": {"endpoints": {"default": {
        "apiType": "openAIV1Completion", "baseUrl": "http://127.0.0.1:8080", "maxContextTokenSize": 8192,
        "promptTemplate": "llama3"}}}}))
    assert config.llm.endpoints["default"].max_context_tokens == 8192
    with pytest.raises(ConfigError, match="did you mean 'chatml'"):
        load(ServiceConfig, write(tmp_path, {"llm": {"endpoints": {"default": {
            "apiType": "openAIV1Completion", "promptTemplate": "chatlm"}}}}))
    with pytest.raises(ConfigError, match="did you mean 'jsonSchema'"):
        load(ServiceConfig, write(tmp_path, {"llm": {"endpoints": {"default": {
            "apiType": "openAIChatCompletion", "structuredOutput": "jsonschema"}}}}))
    with pytest.raises(ConfigError, match='needs "model"'):
        load(ServiceConfig, write(tmp_path, {"llm": {"endpoints": {"default": {"apiType": "ollamaApiChat"}}}}))
    with pytest.raises(ConfigError, match="contradicts"):
        load(ServiceConfig, write(tmp_path, {"llm": {"endpoints": {"default": {
            "provider": "anthropic", "apiType": "ollamaApiChat", "model": "x"}}}}))


def test_keys_defaults_and_locality_follow_the_type_and_host():
    assert Endpoint().key_env == "ANTHROPIC_API_KEY" and not Endpoint().is_local
    hosted = Endpoint(api_type="openAIChatCompletion", model="gpt-4o-mini")
    assert (hosted.url, hosted.key_env, hosted.is_local, hosted.concurrency) == (
        "https://api.openai.com", "OPENAI_API_KEY", False, 8)
    vllm = Endpoint(api_type="openAIChatCompletion", base_url="http://10.0.0.5:8000/v1", model="qwen")
    assert (vllm.url, vllm.key_env, vllm.is_local, vllm.concurrency) == ("http://10.0.0.5:8000", None, True, 1)
    ollama = Endpoint(api_type="ollamaApiChat", model="llama3.1:8b")
    assert (ollama.url, ollama.key_env, ollama.is_local) == ("http://127.0.0.1:11434", None, True)
    assert Endpoint(api_type="openAIChatCompletion", base_url="https://openrouter.ai/api", api_key_env="OR_KEY",
                    model="m").key_env == "OR_KEY"


def test_auto_uses_a_local_default_endpoint_with_no_key_and_says_so():
    config = LlmConfig(endpoints={"default": Endpoint(api_type="ollamaApiChat", model="llama3.1:8b")},
                       tasks={"reflect": TaskRoute(endpoint_name="claude")} and {})
    assert select_provider(config, env={}) == "endpoints"
    assert make_tasks(config, env={}).provider == "endpoints"
    assert why_provider(config, env={}) == (
        "LLM: ollamaApiChat llama3.1:8b at http://127.0.0.1:11434 (endpoint 'default')")


def test_auto_falls_back_to_the_offline_heuristic_when_the_hosted_default_has_no_key_and_says_why():
    config = LlmConfig(endpoints={"default": Endpoint(api_type="openAIChatCompletion", model="gpt-4o-mini")})
    assert select_provider(config, env={}) == "offline"
    assert why_provider(config, env={}) == (
        "LLM: the offline heuristic (OPENAI_API_KEY is not set for the default openAIChatCompletion endpoint "
        "gpt-4o-mini)")
    assert select_provider(config, env={"OPENAI_API_KEY": "sk"}) == "endpoints"


def test_mixed_routing_is_said_at_start():
    config = LlmConfig(endpoints={"default": Endpoint(api_type="openAIChatCompletion", base_url="http://127.0.0.1:8080",
                                                      model="tiny"),
                                  "claude": Endpoint()},
                       tasks={"reflect": TaskRoute(endpoint_name="claude")})
    assert why_provider(config, env={}).endswith("(endpoint 'default'); routed: reflect -> 'claude'")


def test_the_front_ends_samplers_pass_through_unless_the_preset_overrides_them():
    def body(front_end_samplers: str) -> dict:
        config = LlmConfig(endpoints={"default": Endpoint(api_type="openAIChatCompletion", base_url="http://127.0.0.1:9",
                                                          model="m", max_context_tokens=8192)},
                           presets={"default": Preset(temperature=0.2, top_p=0.5, max_tokens=300,
                                                      front_end_samplers=front_end_samplers)})
        tasks = EndpointTasks(config, env={})
        sampling = Sampling(temperature=0.9, top_p=0.95, max_tokens=77, stop=("\nUser:",), seed=3)
        prepared = tasks.prepare(Respond(lines=(ChatLine(role="user", content="hi", seq=1, ts_us=1),),
                                         sampling=sampling))
        return ADAPTERS["openAIChatCompletion"].body(prepared.request, config.endpoints["default"], "none", True, 8192)

    passed = body("passThrough")
    assert (passed["temperature"], passed["top_p"], passed["max_tokens"], passed["stop"], passed["seed"]) == (
        0.9, 0.95, 77, ["\nUser:"], 3)
    assert passed["stream"] is True and passed["stream_options"] == {"include_usage": True}
    overridden = body("override")
    assert (overridden["temperature"], overridden["top_p"], overridden["stop"]) == (0.2, 0.5, ["\nUser:"])


def test_each_type_names_the_samplers_its_way():
    request = Request(model="m", system="S", messages=(("user", "hi"),), max_tokens=50, temperature=0.4,
                      sampling=Sampling(top_p=0.9, stop=("END",), seed=1))
    endpoint = Endpoint(api_type="ollamaApiChat", model="m", keep_alive="5m")
    ollama = ADAPTERS["ollamaApiChat"].body(request, endpoint, "none", False, 4096)
    assert ollama["options"] == {"num_ctx": 4096, "num_predict": 50, "temperature": 0.4, "top_p": 0.9, "seed": 1,
                                 "stop": ["END"]}
    assert ollama["stream"] is False and ollama["keep_alive"] == "5m" and "format" not in ollama
    kobold = ADAPTERS["koboldCppGenerate"].body(request, Endpoint(api_type="koboldCppGenerate"), "none", False, 2048)
    assert (kobold["max_length"], kobold["max_context_length"], kobold["sampler_seed"]) == (50, 2048, 1)
    assert kobold["stop_sequence"] == ["<|im_end|>", "END"]
    assert kobold["prompt"] == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_openai_and_local_prices():
    assert price_of("gpt-4o-mini").input_per_mtok == 0.15 and price_of("gpt-4o-2024-08-06").input_per_mtok == 2.5
    assert price_of("gpt-4.1-mini").output_per_mtok == 1.6 and price_of("gpt-4-turbo").input_per_mtok == 10.0

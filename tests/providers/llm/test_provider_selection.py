"""Which provider answers: one factory, driven by configuration and the API key."""

from __future__ import annotations

import pytest

from engram.cli.demo_sections import describe_providers
from engram.config.errors import ConfigError
from engram.config.llm import Endpoint, LlmConfig, TaskRoute
from engram.config.service import ServiceConfig
from engram.providers.llm import make_tasks


def test_without_an_api_key_the_default_is_the_offline_heuristic():
    tasks = make_tasks(LlmConfig(), env={})
    assert tasks.provider == "offline"
    assert "not a language model" in tasks.describe()


def test_with_an_api_key_the_default_is_anthropic():
    tasks = make_tasks(LlmConfig(), env={"ANTHROPIC_API_KEY": "sk-test"})
    assert tasks.provider == "anthropic"
    assert tasks.describe() == "anthropic (claude-sonnet-5-5 via endpoint 'default')"


def test_offline_can_be_chosen_even_with_a_key():
    assert make_tasks(LlmConfig(provider="offline"), env={"ANTHROPIC_API_KEY": "sk"}).provider == "offline"


def test_asking_for_anthropic_without_its_key_is_a_clear_configuration_error():
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        make_tasks(LlmConfig(provider="anthropic"), env={})


def test_the_key_variable_is_the_default_endpoints_own():
    config = LlmConfig(endpoints={"default": Endpoint(api_key_env="MY_KEY")})
    assert make_tasks(config, env={"ANTHROPIC_API_KEY": "sk"}).provider == "offline"
    assert make_tasks(config, env={"MY_KEY": "sk"}).provider == "anthropic"


def test_routes_must_name_configured_endpoints_and_known_tasks():
    with pytest.raises(ValueError, match="names endpoint 'fast'"):
        LlmConfig(tasks={"observe": TaskRoute(endpoint_name="fast")})
    with pytest.raises(ValueError, match="unknown memory task"):
        LlmConfig(tasks={"summarise": TaskRoute()})


def test_configuration_keys_are_wilmer_style_camel_case():
    config = LlmConfig.model_validate(
        {"tasks": {"summarize_chunk": {"endpointName": "default", "preset": "default", "maxResponseSizeInTokens": 300}}}
    )
    assert config.tasks["summarize_chunk"].max_response_size_in_tokens == 300


def test_demo_description_names_the_provider_model_and_embedder():
    offline = describe_providers(ServiceConfig(), env={})
    assert offline.splitlines() == [
        "LLM: offline (offline-heuristic-v1: deterministic heuristics, not a language model); "
        "set ANTHROPIC_API_KEY to use claude-sonnet-5-5",
        "Embedder: all-MiniLM-L6-v2-onnx-int8 (384 dims, onnxruntime, offline)",
    ]
    online = describe_providers(ServiceConfig(), env={"ANTHROPIC_API_KEY": "sk"})
    assert online.startswith("LLM: anthropic (claude-sonnet-5-5")

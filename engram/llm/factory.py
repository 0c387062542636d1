"""Which provider answers memory tasks: the one function that decides.

    provider "offline"    -> OfflineTasks
    provider "anthropic"  -> AnthropicTasks; the default endpoint's API key must be set
    provider "auto"       -> AnthropicTasks when the default endpoint is an anthropic one and its
                             API key variable (ANTHROPIC_API_KEY unless configured) is set, else OfflineTasks
"""

from __future__ import annotations

import os
from typing import Mapping

from engram.config.errors import ConfigError
from engram.config.llm import LlmConfig
from engram.llm.offline.provider import OfflineTasks
from engram.llm.tasks import MemoryTasks


def select_provider(config: LlmConfig, env: Mapping[str, str] | None = None) -> str:
    """"anthropic" or "offline" for `config` in environment `env` (default: os.environ)."""
    env = os.environ if env is None else env
    default = config.endpoints["default"]
    has_key = bool(env.get(default.api_key_env))
    if config.provider == "offline":
        return "offline"
    if config.provider == "anthropic":
        if default.provider != "anthropic":
            raise ConfigError('llm.provider is "anthropic" but the "default" endpoint is an offline one')
        if not has_key:
            raise ConfigError(f'llm.provider is "anthropic" but {default.api_key_env} is not set')
        return "anthropic"
    return "anthropic" if default.provider == "anthropic" and has_key else "offline"


def make_tasks(config: LlmConfig | None = None, env: Mapping[str, str] | None = None) -> MemoryTasks:
    """The memory-task provider that `config` selects (see the module docstring)."""
    config = config or LlmConfig()
    if select_provider(config, env) == "anthropic":
        from engram.llm.anthropic_tasks import AnthropicTasks  # the SDK takes a second to import

        return AnthropicTasks(config, env=env)
    return OfflineTasks()


def describe_providers(service_config, env: Mapping[str, str] | None = None) -> str:
    """Two lines for `engram demo`: which LLM provider/model and which embedder are in use."""
    from engram.embeddings.factory import describe_embedder

    config: LlmConfig = service_config.llm
    provider = select_provider(config, env)
    if provider == "anthropic":
        llm = make_tasks(config, env).describe()
    else:
        llm = OfflineTasks().describe()
        default = config.endpoints["default"]
        if config.provider == "auto" and default.provider == "anthropic":
            llm += f"; set {default.api_key_env} to use {default.model}"
    return f"LLM: {llm}\nEmbedder: {describe_embedder(service_config.embedder)}"

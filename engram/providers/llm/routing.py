"""Routes named outside the LLM configuration (settings files, workflow nodes), checked up front.

A settings file or a workflow node names endpoints and presets by WilmerAI's keys (`endpointName`,
`preset`, `vectorMemoryEndpointName`, `vectorMemoryPreset`). A name that is not configured is a
`ConfigError` naming the key and the closest configured name, raised where the file is read
(`engram.memory.settings`, `engram workflow run`), so that a typo never reaches a background job.

Names route calls only when an LLM provider answers them: the offline heuristic calls no endpoint,
so under it names are recorded as written and not checked (a WilmerAI settings file runs as it
is); they are checked as soon as the anthropic provider is selected.
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping

from engram.config.discussion import DiscussionSettings
from engram.config.errors import ConfigError
from engram.config.llm import LlmConfig

# (where, endpoint name or None, preset name or None)
Named = tuple[str, str | None, str | None]


def routes_by_name(config: LlmConfig, env: Mapping[str, str] | None = None) -> bool:
    """True when the provider that `config` selects calls endpoints by name."""

    return select_provider(config, env) == "anthropic"


def route_problems(config: LlmConfig, named: Iterable[Named]) -> list[str]:
    out = []
    for where, endpoint_name, preset in named:
        problem = config.route_problem(endpoint_name, preset)
        if problem:
            out.append(f"{where} names {problem}")
    return out


def check_routes(config: LlmConfig, named: Iterable[Named], source: str, env: Mapping[str, str] | None = None) -> None:
    """Raise a ConfigError for every name in `named` that the selected provider cannot route."""
    if not routes_by_name(config, env):
        return
    problems = route_problems(config, named)
    if problems:
        raise ConfigError("\n".join(f"{source}: {p}" for p in problems))


def discussion_routes(settings: DiscussionSettings) -> list[Named]:
    return [
        ("endpointName", settings.endpoint_name, None),
        ("preset", None, settings.preset),
        ("vectorMemoryEndpointName", settings.vector_memory_endpoint_name, None),
        ("vectorMemoryPreset", None, settings.vector_memory_preset),
    ]


def check_discussion_settings(
    settings: DiscussionSettings, config: LlmConfig, source: str, env: Mapping[str, str] | None = None
) -> None:
    check_routes(config, discussion_routes(settings), source, env)


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

"""Routes named outside the LLM configuration (settings files, workflow nodes), checked up front.

A settings file or a workflow node names endpoints and presets by WilmerAI's keys (`endpointName`,
`preset`, `vectorMemoryEndpointName`, `vectorMemoryPreset`). A name that is not configured is a
`ConfigError` naming the key and the closest configured name, raised where the file is read
(`engram.memory.settings`, `engram workflow run`), so that a typo never reaches a background job.

Names route calls only when an LLM provider answers them: the offline heuristic calls no endpoint,
so under it names are recorded as written and not checked (a WilmerAI settings file runs as it
is); they are checked as soon as an endpoint provider is selected.
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

    return select_provider(config, env) != "offline"


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
    """Which provider answers memory tasks in environment `env` (default: os.environ):

    "anthropic"  the default endpoint is a claudeMessages one and its key is set,
    "endpoints"  the default endpoint is of another apiType (a local server, OpenAI, ...) and needs no key or has it,
    "offline"    the labelled heuristic (provider "offline", an offline default endpoint, or a key not set under "auto").

    `llm.provider` "anthropic" insists on a claudeMessages default endpoint with its key set; "auto" takes the
    default endpoint whatever its type when it can be called (a local server needs no key)."""
    env = os.environ if env is None else env
    default = config.endpoints["default"]
    key_env = default.key_env
    has_key = key_env is None or bool(env.get(key_env))
    if config.provider == "offline" or (config.provider == "auto" and default.api_type == "offline"):
        return "offline"
    if config.provider == "anthropic":
        if default.api_type != "claudeMessages":
            raise ConfigError(f'llm.provider is "anthropic" but the "default" endpoint is a {default.api_type} one '
                              '(use "provider": "auto" for other endpoint types)')
        if not has_key:
            raise ConfigError(f'llm.provider is "anthropic" but {key_env} is not set')
        return "anthropic"
    if not has_key:
        return "offline"
    return "anthropic" if default.api_type == "claudeMessages" else "endpoints"


def why_provider(config: LlmConfig, env: Mapping[str, str] | None = None) -> str:
    """The start-up line saying which provider answers and why."""
    env = os.environ if env is None else env
    choice = select_provider(config, env)
    default = config.endpoints["default"]
    if choice == "offline":
        if config.provider == "offline" or default.api_type == "offline":
            return "LLM: the offline heuristic (configured)"
        return (f"LLM: the offline heuristic ({default.key_env} is not set for the default {default.api_type} "
                f"endpoint {default.model or ''})").replace(" )", ")")
    routed = sorted({f"{task} -> {r.endpoint_name!r}" for task, r in config.tasks.items() if r.endpoint_name != "default"})
    where = f" at {default.url}" if default.url else ""
    extra = f"; routed: {', '.join(routed)}" if routed else ""
    return f"LLM: {default.api_type} {default.model or '(server default model)'}{where} (endpoint 'default'){extra}"


def reply_endpoint(config: LlmConfig, provider: str, endpoint_name: str | None = None):
    """The endpoint the proxy's reply is answered by: the reply node's own `endpointName`, else the `respond` task's
    route, else "default"; None when the offline responder answers (no LLM selected, or an endpoint of type
    offline)."""
    if provider == "offline":
        return None
    route = config.tasks.get("respond")
    endpoint = config.endpoints.get(endpoint_name or (route.endpoint_name if route else "default"))
    return None if endpoint is None or endpoint.api_type == "offline" else endpoint

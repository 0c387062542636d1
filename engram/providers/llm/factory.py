"""Which provider answers memory tasks: the one function that decides.

    provider "offline"    -> OfflineTasks
    provider "anthropic"  -> AnthropicTasks; the default endpoint's API key must be set
    provider "auto"       -> AnthropicTasks when the default endpoint is an anthropic one and its
                             API key variable (ANTHROPIC_API_KEY unless configured) is set, else OfflineTasks
"""

from __future__ import annotations

from typing import Mapping

from engram.config.llm import LlmConfig
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.routing import select_provider
from engram.providers.llm.tasks import MemoryTasks


def make_tasks(config: LlmConfig | None = None, env: Mapping[str, str] | None = None) -> MemoryTasks:
    """The memory-task provider that `config` selects (see the module docstring)."""
    config = config or LlmConfig()
    if select_provider(config, env) == "anthropic":
        from engram.providers.llm.anthropic_tasks import AnthropicTasks  # the SDK takes a second to import

        return AnthropicTasks(config, env=env)
    return OfflineTasks()



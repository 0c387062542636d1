"""Which provider answers memory tasks: the one function that decides.

    provider "offline"    -> OfflineTasks
    provider "anthropic"  -> EndpointTasks; the default endpoint is claudeMessages and its API key is set
    provider "auto"       -> EndpointTasks when the default endpoint, whatever its apiType, needs no key (a
                             server the user runs) or its key variable is set, else OfflineTasks
                             (`routing.why_provider` is the line saying which, printed at start)
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from engram.config.llm import LlmConfig
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.routing import select_provider
from engram.providers.llm.tasks import MemoryTasks


def make_tasks(config: LlmConfig | None = None, env: Mapping[str, str] | None = None,
               home: Path | None = None) -> MemoryTasks:
    """The memory-task provider that `config` selects (see the module docstring). `home`: the engram home, whose
    `run/llm/` holds each endpoint's concurrency slots, shared by every process of the home."""
    config = config or LlmConfig()
    if select_provider(config, env) != "offline":
        from engram.providers.llm.endpoint_tasks import EndpointTasks  # the SDK takes a second to import

        slots = Path(home).expanduser() / "run" / "llm" if home is not None else None
        return EndpointTasks(config, env=env, slots_dir=slots)
    return OfflineTasks()



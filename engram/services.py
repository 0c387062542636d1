"""The services policies and projections are given: memory tasks (LLM) and the embedder.

Built once per process from the service configuration. Parts of engram that are not
installed in this build are simply absent from the dict.
"""

from __future__ import annotations

from typing import Any

from engram.config.service import ServiceConfig


def build_services(config: ServiceConfig) -> dict[str, Any]:
    services: dict[str, Any] = {"config": config}
    try:
        from engram.llm.factory import make_tasks
    except ImportError:
        pass
    else:
        services["tasks"] = make_tasks(config.llm)
    return services

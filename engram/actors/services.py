"""The services of an actor (`engram.providers.services`), with the home's EmbedderActor as its index-time embedder."""

from __future__ import annotations

from typing import Any

from engram.config.service import ServiceConfig
from engram.providers.services import build_services


def actor_services(config: ServiceConfig, embedder_actor: str | None) -> dict[str, Any]:
    embedder = None
    if embedder_actor is not None:
        from engram.actors.embedder import RemoteEmbedder
        from engram.providers.embeddings.factory import index_time

        embedder = RemoteEmbedder(embedder_actor, str(config.home), index_time(config.embedder).model_dump(mode="json"))
    return build_services(config, embedder=embedder)


def where() -> dict:
    """The node this actor runs on (its Ray node id and address) and its process: what `engram status` shows."""
    import os

    import ray

    return {"node_id": ray.get_runtime_context().get_node_id(), "address": ray.util.get_node_ip_address(),
            "pid": os.getpid()}

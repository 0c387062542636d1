"""The projections engram maintains. Live hosting and replay both build exactly this list.

Entries are "module:Class" so that importing the registry stays cheap; add a projection by
adding its line here.
"""

from __future__ import annotations

import importlib

from engram.projections.base import Projection, ProjectionContext

PROJECTIONS: list[str] = [
    "engram.projections.discussions:DiscussionIndex",
    "engram.projections.discussion_files:DiscussionFiles",
    "engram.projections.vector_memory:VectorMemory",
    "engram.projections.traces:TraceProjection",
    "engram.projections.working_memory:WorkingMemoryProjection",
    "engram.projections.compactions:CompactionChainProjection",
    "engram.projections.observations:ObservationLogProjection",
]


def projection_classes() -> list[type[Projection]]:
    classes = []
    for entry in PROJECTIONS:
        module, _, name = entry.partition(":")
        classes.append(getattr(importlib.import_module(module), name))
    return classes


def build_projections(ctx: ProjectionContext) -> list[Projection]:
    return [cls(ctx) for cls in projection_classes()]

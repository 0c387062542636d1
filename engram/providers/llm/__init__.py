"""Memory tasks (summaries, observations, reflections, facts, ...) answered by an LLM or by a labelled heuristic.

    from engram.providers.llm import make_tasks
    tasks = make_tasks(service_config.llm)          # anthropic with an API key, else offline
    result = tasks.summarize_chunk(lines)           # Result(value=str, llm=LlmCall)
"""

from engram.providers.llm.factory import make_tasks
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.routing import select_provider
from engram.providers.llm.tasks import MemoryTasks
from engram.providers.llm.types import (
    ChatLine,
    Compaction,
    Contradiction,
    Fact,
    Reflection,
    Result,
    StructuredMemory,
    TraceBrief,
    TraceCandidate,
)

# The anthropic SDK takes about a second to import: these load on first use.
_LAZY = {
    "EndpointTasks": "engram.providers.llm.endpoint_tasks",
    "BatchRunner": "engram.providers.llm.batches",
    "EventLogJournal": "engram.providers.llm.batches",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'engram.providers.llm' has no attribute {name!r}")


__all__ = [
    "EndpointTasks",
    "BatchRunner",
    "EventLogJournal",
    "OfflineTasks",
    "ChatLine",
    "Compaction",
    "Contradiction",
    "Fact",
    "MemoryTasks",
    "Reflection",
    "Result",
    "StructuredMemory",
    "TraceBrief",
    "TraceCandidate",
    "make_tasks",
    "select_provider",
]

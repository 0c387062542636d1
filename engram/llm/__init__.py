"""Memory tasks (summaries, observations, reflections, facts, ...) answered by an LLM or by a labelled heuristic.

    from engram.llm import make_tasks
    tasks = make_tasks(service_config.llm)          # anthropic with an API key, else offline
    result = tasks.summarize_chunk(lines)           # Result(value=str, llm=LlmCall)
"""

from engram.llm.factory import describe_providers, make_tasks, select_provider
from engram.llm.tasks import MemoryTasks
from engram.llm.types import (
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

__all__ = [
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
    "describe_providers",
    "make_tasks",
    "select_provider",
]

"""`OfflineTasks`: every memory task by deterministic heuristics, labelled `offline-heuristic` everywhere.

Same input, same value, byte for byte: no randomness, no clock (except the latency recorded in
the provenance), no iteration over unordered sets where order reaches the output.
"""

from __future__ import annotations

import time
from typing import Callable

import msgspec

from engram.events.provenance import LlmCall
from engram.kernel.tokens import estimate_tokens
from engram.providers.llm import inputs as i
from engram.providers.llm.hashing import digest
from engram.providers.llm.offline import condense, facts, observe, reflect, respond, structured
from engram.providers.llm.offline.tuning import OFFLINE_MODEL
from engram.providers.llm.tasks import MemoryTasks
from engram.providers.llm.types import ChatLine, Result

PROVIDER = "offline"

_encoder = msgspec.json.Encoder()


def _input_text(task_input: i.TaskInput) -> str:
    """The text a task reads, for its token count."""
    if isinstance(task_input, (i.SummarizeChunk, i.ExtractMemory, i.Observe, i.ExtractFacts, i.Compact)):
        return "\n".join(line.content for line in task_input.lines)
    if isinstance(task_input, i.MergeSummary):
        return "\n".join([task_input.previous_summary, *task_input.new_memories])
    if isinstance(task_input, i.Reflect):
        return "\n".join(n.text for n in task_input.notes)
    if isinstance(task_input, i.SummarizeSchema):
        return "\n".join(task_input.members)
    if isinstance(task_input, i.Hyde):
        return task_input.query
    if isinstance(task_input, i.Respond):
        extra = (task_input.completion_prompt,) if task_input.completion_prompt else ()
        return "\n".join([*(line.content for line in task_input.lines), task_input.prompt, *extra, *task_input.context])
    raise TypeError(f"not a task input: {type(task_input).__name__}")


def _output_text(value: object) -> str:
    return value if isinstance(value, str) else _encoder.encode(value).decode()


def compute(task_input: i.TaskInput) -> object:
    """The heuristic value of one task (no provenance)."""
    t = task_input
    if isinstance(t, i.SummarizeChunk):
        return condense.summarize_chunk(t.lines, t.max_tokens)
    if isinstance(t, i.MergeSummary):
        return condense.merge_summary(t.previous_summary, t.new_memories, t.max_tokens)
    if isinstance(t, i.ExtractMemory):
        return structured.extract_memory(t.lines, t.max_tokens)
    if isinstance(t, i.Observe):
        return observe.observe(t.lines, t.traits)
    if isinstance(t, i.Reflect):
        return reflect.reflect(t.notes, t.existing, t.traits)
    if isinstance(t, i.ExtractFacts):
        return facts.extract_facts(t.lines, t.traits, t.importance_threshold, t.max_per_turn)
    if isinstance(t, i.SummarizeSchema):
        return condense.summarize_schema(t.members, t.max_tokens)
    if isinstance(t, i.Hyde):
        return condense.hyde(t.query, t.max_tokens)
    if isinstance(t, i.Compact):
        return condense.compact(t.lines, t.target_tokens, t.previous_summary)
    if isinstance(t, i.Respond):
        lines = t.lines
        if t.completion_prompt.strip() and not lines:  # a front end's text prompt: the one user turn
            lines = (ChatLine(role="user", content=t.completion_prompt, seq=0, ts_us=0),)
        return respond.respond(lines, t.prompt, t.context, t.max_tokens)
    raise TypeError(f"not a task input: {type(t).__name__}")


class OfflineTasks(MemoryTasks):
    """The default provider without an API key: a labelled heuristic, never a model."""

    provider = PROVIDER
    model = OFFLINE_MODEL

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self._clock = clock  # measures latency for provenance only

    def describe(self) -> str:
        return f"offline ({OFFLINE_MODEL}: deterministic heuristics, not a language model)"

    def run(self, task_input: i.TaskInput) -> Result:
        start = self._clock()
        value = compute(task_input)
        latency_ms = (self._clock() - start) * 1000.0
        return Result(value=value, llm=self.provenance(task_input, value, latency_ms))

    def provenance(self, task_input: i.TaskInput, value: object, latency_ms: float = 0.0) -> LlmCall:
        return LlmCall(
            provider=PROVIDER,
            model=OFFLINE_MODEL,
            task=task_input.task,
            prompt_hash=digest(OFFLINE_MODEL, i.encode_input(task_input)),
            input_tokens=estimate_tokens(_input_text(task_input)),
            output_tokens=estimate_tokens(_output_text(value)),
            latency_ms=round(latency_ms, 3),
        )

"""One input struct per memory task: everything the task may look at, as plain data.

A provider's `run(input)` is a pure function of this value (plus its configuration), which is
what lets the offline heuristic be byte-for-byte deterministic and lets a Message Batch be
resumed after a crash: the inputs are recorded with the batch and decoded again by `task` tag.
"""

from __future__ import annotations

from typing import Union

import msgspec

from engram.config import defaults as d
from engram.events.background import ObservationNote
from engram.providers.llm.focus import NEUTRAL, Traits
from engram.providers.llm.types import ChatLine, TraceBrief
from engram.providers.endpoints.wire import Sampling


class TaskInput(msgspec.Struct, frozen=True, kw_only=True, tag_field="task"):
    """Base of every task input; the tag is the task name.

    `endpoint_name` / `preset` route this one call (WilmerAI's `endpointName`/`preset` of a settings
    file or a node); None leaves the task's configured route (`llm.tasks`, else "default"). Only
    providers that call endpoints read them: the offline heuristic answers the same either way.
    """

    endpoint_name: str | None = None
    preset: str | None = None

    @property
    def task(self) -> str:
        return self.__struct_config__.tag  # type: ignore[return-value]


class SummarizeChunk(TaskInput, tag="summarize_chunk", frozen=True):
    """A chronological chunk memory (WilmerAI `[TextChunk]`), optionally with earlier memories."""

    lines: tuple[ChatLine, ...]
    max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS
    recent_memories: tuple[str, ...] = ()  # [Memory_file]
    all_memories: tuple[str, ...] = ()  # [Full_Memory_file]
    chat_summary: str = ""  # [Chat_Summary] / [CHAT_SUMMARY]
    system_prompt: str | None = None  # the discussion's `systemPrompt`, overriding the template
    prompt: str | None = None  # the discussion's `prompt`, overriding the template


class MergeSummary(TaskInput, tag="merge_summary", frozen=True):
    """The rolling chat summary with `new_memories` merged in (WilmerAI chatSummarySummarizer)."""

    previous_summary: str
    new_memories: tuple[str, ...]  # [LATEST_MEMORIES]
    all_memories: tuple[str, ...] = ()  # [Full_Memory_file]
    max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS
    system_prompt: str | None = None
    prompt: str | None = None


class ExtractMemory(TaskInput, tag="extract_memory", frozen=True):
    """A structured vector memory (WilmerAI QualityMemory): title, summary, entities, key phrases."""

    lines: tuple[ChatLine, ...]
    max_tokens: int = d.VECTOR_MEMORY_MAX_RESPONSE_TOKENS


class Observe(TaskInput, tag="observe", frozen=True):
    """Typed observation notes about `lines` (the Wunderland Observer)."""

    lines: tuple[ChatLine, ...]
    traits: Traits = NEUTRAL


class Reflect(TaskInput, tag="reflect", frozen=True):
    """Long-term trace candidates from `notes`, contradictions flagged and resolved (the Reflector)."""

    notes: tuple[ObservationNote, ...]
    existing: tuple[TraceBrief, ...] = ()
    traits: Traits = NEUTRAL


class ExtractFacts(TaskInput, tag="extract_facts", frozen=True):
    """Auto-ingest facts from one turn, within the personality's threshold and per-turn limit."""

    lines: tuple[ChatLine, ...]
    traits: Traits = NEUTRAL
    importance_threshold: float = d.AUTO_INGEST_IMPORTANCE
    max_per_turn: int = d.AUTO_INGEST_MAX_PER_TURN


class SummarizeSchema(TaskInput, tag="summarize_schema", frozen=True):
    """A semantic summary of a cluster of episodic traces (consolidation, schema integration)."""

    members: tuple[str, ...]
    max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS


class Hyde(TaskInput, tag="hyde", frozen=True):
    """A hypothetical memory that would answer `query` (HyDE retrieval)."""

    query: str
    max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS


class Compact(TaskInput, tag="compact", frozen=True):
    """A summary of `lines` within `target_tokens` for infinite-context compaction."""

    lines: tuple[ChatLine, ...]
    target_tokens: int
    previous_summary: str = ""


class Respond(TaskInput, tag="respond", frozen=True):
    """A free-form answer (the `Standard` workflow node, `engram chat`).

    Without `prompt`, the conversation `lines` are the turns the model answers, with `context` (memory
    passages) shown before the last user message. With `prompt` (a rendered node prompt that carries
    whatever it needs of the conversation and the memories, as WilmerAI's Standard node does), the
    prompt is the one user turn; it may place the context itself with `[MemoryContext]`.
    """

    lines: tuple[ChatLine, ...] = ()
    prompt: str = ""
    system_prompt: str | None = None
    context: tuple[str, ...] = ()
    max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS
    # The front end's own samplers (the proxy): they win over the preset's unless it says frontEndSamplers "override".
    sampling: Sampling | None = None
    # A text prompt the front end formatted itself (/v1/completions, /api/generate): sent as it is to a
    # text-completion endpoint, as the one user turn to a chat endpoint.
    completion_prompt: str = ""


AnyTaskInput = Union[
    SummarizeChunk, MergeSummary, ExtractMemory, Observe, Reflect, ExtractFacts, SummarizeSchema, Hyde, Compact,
    Respond,
]

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyTaskInput)


def encode_input(task_input: TaskInput) -> str:
    return _encoder.encode(task_input).decode()


def decode_input(data: str | bytes) -> TaskInput:
    return _decoder.decode(data)

"""The one interface of memory tasks that the rest of engram calls.

A provider implements `run(task_input) -> Result`; the named methods below build the input
struct and call it, so every provider offers the same signatures. Personality arguments take
the config model `Personality` (or `Traits`, or None for a neutral personality).

Every method takes `endpoint_name` and `preset`: a route for this one call (WilmerAI's
`endpointName`/`preset` of a settings file or a node), winning over the task's configured route.
The anthropic provider records the endpoint that answered in `LlmCall.endpoint`; a name that is
not configured is a `ConfigError` naming the closest one (settings files and workflows are checked
against the configuration before anything runs, see `engram.providers.llm.routing`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, Sequence

from engram.config import defaults as d
from engram.config.agent import Personality
from engram.events.background import ObservationNote
from engram.providers.endpoints.wire import Sampling
from engram.providers.llm import inputs as i
from engram.providers.llm.focus import Traits, ingest_policy, traits
from engram.providers.llm.types import ChatLine, Compaction, Fact, Reflection, Result, StructuredMemory, TraceBrief


# The task inputs' fields that hold sequences (callers pass any iterable; the frozen inputs hold tuples).
SEQUENCES = frozenset({"lines", "recent_memories", "all_memories", "new_memories", "context", "notes", "existing",
                       "members"})


class MemoryTasks(ABC):
    """Summaries, structured memories, observations, reflections, facts, schemas, HyDE, compaction."""

    provider: str  # "anthropic" | "offline"

    @abstractmethod
    def run(self, task_input: i.TaskInput) -> Result:
        """Run one task. Never raises for a failed LLM call: the result records the failure. A call
        routed to an endpoint or preset that is not configured is a ConfigError (a configuration
        problem, caught where settings and workflows are read, see `engram.providers.llm.routing`)."""

    def stream(self, task_input: i.TaskInput, on_text: Callable[[str], None]) -> Result:
        """`run`, passing the answer's text to `on_text` as it is produced (a free-form answer streamed to a
        user). This default is for providers that do not stream: the whole answer, once, when it exists (the
        labelled offline heuristic's answer is instantaneous). Nothing is passed for a failed call."""
        result = self.run(task_input)
        if not result.llm.error and isinstance(result.value, str) and result.value:
            on_text(result.value)
        return result

    @abstractmethod
    def describe(self) -> str:
        """One line saying which provider and model answer (for `engram demo` and logs)."""

    def unroutable(self, named: Sequence[tuple[str, str | None, str | None]]) -> list[str]:
        """What is wrong with endpoint/preset names (where, endpoint, preset) that calls would use:
        nothing for a provider that calls no endpoint (the offline heuristic)."""
        return []

    def task(self, cls: type[i.TaskInput], endpoint_name: str | None, preset: str | None,
             on_text: Callable[[str], None] | None = None, **fields) -> Result:
        """Run the task `cls` with `fields` on the call's own route (`endpoint_name`, `preset`); sequences become the
        tuples the frozen inputs hold. `on_text`: stream the answer (`stream`)."""
        values = {k: tuple(v) if k in SEQUENCES else v for k, v in fields.items()}
        task_input = cls(**values, endpoint_name=endpoint_name, preset=preset)
        return self.run(task_input) if on_text is None else self.stream(task_input, on_text)

    # ------------------------------------------------------------------ discussion memory (WilmerAI)

    def summarize_chunk(
        self,
        lines: Sequence[ChatLine],
        *,
        max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS,
        recent_memories: Sequence[str] = (),
        all_memories: Sequence[str] = (),
        chat_summary: str = "",
        system_prompt: str | None = None,
        prompt: str | None = None,
        endpoint_name: str | None = None,
        preset: str | None = None,
    ) -> Result[str]:
        return self.task(i.SummarizeChunk, endpoint_name, preset, lines=lines, max_tokens=max_tokens,
                         recent_memories=recent_memories, all_memories=all_memories, chat_summary=chat_summary,
                         system_prompt=system_prompt, prompt=prompt)

    def merge_summary(
        self,
        previous_summary: str,
        new_memories: Sequence[str],
        *,
        all_memories: Sequence[str] = (),
        max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS,
        system_prompt: str | None = None,
        prompt: str | None = None,
        endpoint_name: str | None = None,
        preset: str | None = None,
    ) -> Result[str]:
        return self.task(i.MergeSummary, endpoint_name, preset, previous_summary=previous_summary,
                         new_memories=new_memories, all_memories=all_memories, max_tokens=max_tokens,
                         system_prompt=system_prompt, prompt=prompt)

    def extract_memory(
        self,
        lines: Sequence[ChatLine],
        *,
        max_tokens: int = d.VECTOR_MEMORY_MAX_RESPONSE_TOKENS,
        endpoint_name: str | None = None,
        preset: str | None = None,
    ) -> Result[StructuredMemory]:
        return self.task(i.ExtractMemory, endpoint_name, preset, lines=lines, max_tokens=max_tokens)

    def respond(
        self,
        lines: Sequence[ChatLine],
        *,
        prompt: str = "",
        system_prompt: str | None = None,
        context: Sequence[str] = (),
        max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS,
        endpoint_name: str | None = None,
        preset: str | None = None,
        on_text: Callable[[str], None] | None = None,
        sampling: Sampling | None = None,
        completion_prompt: str = "",
    ) -> Result[str]:
        """A free-form answer: what the `Standard` node and `engram chat` say to the user.

        `lines`: the conversation (oldest first). `prompt`: a rendered prompt; when given it is the
        one user turn the model reads (it carries what it needs of the conversation and memories,
        and may place `context` itself with `[MemoryContext]`); when empty the conversation is
        sent as turns, with `context` shown before its last user message. `context`: memory
        passages (search results, summaries) the answer may draw on. `on_text`: receives the answer's text as
        the model produces it (`stream`); the result still holds the whole answer. `sampling`: the front end's
        own samplers (temperature, top_p, max_tokens, stop, ...), winning over the routed preset's unless the
        preset says `frontEndSamplers: "override"`. `completion_prompt`: a text prompt the front end formatted
        itself (/v1/completions): sent as it is to a text-completion endpoint, as the one user turn to a chat one.

        The offline provider is not a language model and does not pretend to be one: its answer
        is labelled, and quotes the context passages most relevant to the last user message.
        """
        if not prompt.strip() and not completion_prompt.strip() and not any(line.content.strip() for line in lines):
            raise ValueError("respond needs a conversation or a prompt to answer")
        return self.task(i.Respond, endpoint_name, preset, on_text, lines=lines, prompt=prompt,
                         system_prompt=system_prompt, context=context, max_tokens=max_tokens, sampling=sampling,
                         completion_prompt=completion_prompt)

    # ------------------------------------------------------------------ cognitive memory (Wunderland)

    def observe(
        self,
        lines: Sequence[ChatLine],
        *,
        personality: Personality | Traits | None = None,
        endpoint_name: str | None = None,
        preset: str | None = None,
    ) -> Result[tuple[ObservationNote, ...]]:
        return self.task(i.Observe, endpoint_name, preset, lines=lines, traits=traits(personality))

    def reflect(
        self,
        notes: Sequence[ObservationNote],
        *,
        existing: Sequence[TraceBrief] = (),
        personality: Personality | Traits | None = None,
        endpoint_name: str | None = None,
        preset: str | None = None,
    ) -> Result[Reflection]:
        return self.task(i.Reflect, endpoint_name, preset, notes=notes, existing=existing, traits=traits(personality))

    def extract_facts(
        self,
        lines: Sequence[ChatLine],
        *,
        personality: Personality | Traits | None = None,
        importance_threshold: float = d.AUTO_INGEST_IMPORTANCE,
        max_per_turn: int = d.AUTO_INGEST_MAX_PER_TURN,
        endpoint_name: str | None = None,
        preset: str | None = None,
    ) -> Result[tuple[Fact, ...]]:
        """Facts worth storing from one turn. The personality adjusts the threshold and the limit
        (Wunderland: high openness lowers one and raises the other) before the task applies them."""
        t = traits(personality)
        policy = ingest_policy(t, importance_threshold, max_per_turn)
        return self.task(i.ExtractFacts, endpoint_name, preset, lines=lines, traits=t,
                         importance_threshold=policy.importance_threshold, max_per_turn=policy.max_per_turn)

    def summarize_schema(
        self,
        members: Sequence[str],
        *,
        max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS,
        endpoint_name: str | None = None,
        preset: str | None = None,
    ) -> Result[str]:
        return self.task(i.SummarizeSchema, endpoint_name, preset, members=members, max_tokens=max_tokens)

    def hyde(
        self,
        query: str,
        *,
        max_tokens: int = d.MAX_RESPONSE_SIZE_IN_TOKENS,
        endpoint_name: str | None = None,
        preset: str | None = None,
    ) -> Result[str]:
        return self.task(i.Hyde, endpoint_name, preset, query=query, max_tokens=max_tokens)

    def compact(
        self,
        lines: Sequence[ChatLine],
        *,
        target_tokens: int,
        previous_summary: str = "",
        endpoint_name: str | None = None,
        preset: str | None = None,
    ) -> Result[Compaction]:
        return self.task(i.Compact, endpoint_name, preset, lines=lines, target_tokens=target_tokens,
                         previous_summary=previous_summary)

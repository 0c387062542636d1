"""The `Standard` node's LLM call, through the memory-task interface of `engram.llm`.

`MemoryTasks` has no free-form "respond to this prompt" task yet. Until it has one (a method
named `respond`, which this adapter uses as soon as it exists), a Standard node goes through
`summarize_chunk` with the node's own system prompt and prompt, the conversation as its lines:
an LLM provider then answers the node's prompt; the offline provider, which is a heuristic and
not a language model, answers with an extractive digest of the conversation and the prompt, and
its provenance says so (`model = offline-heuristic-…`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engram.config import defaults as d
from engram.events.provenance import LlmCall
from engram.llm.types import ChatLine


@dataclass(frozen=True)
class ChatMessage:
    role: str
    content: str
    name: str | None = None
    message_id: str = ""
    seq: int = 0
    ts_us: int = 0


@dataclass(frozen=True)
class Response:
    text: str
    llm: LlmCall


class Responder:
    def __init__(self, tasks):
        self.tasks = tasks

    def respond(self, *, system_prompt: str, prompt: str, conversation: Sequence[ChatMessage],
                max_tokens: int | None = None) -> Response:
        max_tokens = max_tokens or d.MAX_RESPONSE_SIZE_IN_TOKENS
        respond = getattr(self.tasks, "respond", None)
        if callable(respond):
            result = respond(system_prompt=system_prompt, prompt=prompt, lines=_lines(conversation), max_tokens=max_tokens)
            return Response(result.value, result.llm)
        lines = _lines(conversation)
        if prompt.strip():
            # The node's prompt is the last turn the model (or the heuristic) reads.
            lines.append(ChatLine(role="user", content=prompt, seq=lines[-1].seq + 1 if lines else 0,
                                  ts_us=lines[-1].ts_us if lines else 0, name="Prompt"))
        result = self.tasks.summarize_chunk(
            lines, max_tokens=max_tokens, system_prompt=system_prompt or None, prompt="[TextChunk]"
        )
        return Response(result.value, result.llm)


def _lines(conversation: Sequence[ChatMessage]) -> list[ChatLine]:
    return [
        ChatLine(role=m.role, content=m.content, seq=m.seq or i, ts_us=m.ts_us, message_id=m.message_id, name=m.name)
        for i, m in enumerate(conversation)
    ]

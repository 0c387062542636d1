"""The `Standard` node's LLM call: the `respond` memory task of `engram.providers.llm`.

The node's rendered system prompt and prompt, the conversation, the memory context its prompt
refers to (earlier nodes' outputs), and its own endpoint/preset go to `MemoryTasks.respond`. An
LLM provider answers the prompt; the offline provider, which is a heuristic and not a language
model, answers with a labelled quote of the context most relevant to the last user message, and
its provenance says so (`model = offline-heuristic-…`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from engram.config import defaults as d
from engram.events.provenance import LlmCall
from engram.providers.endpoints.wire import Sampling
from engram.providers.llm.types import ChatLine

if TYPE_CHECKING:
    from engram.providers.llm.tasks import MemoryTasks


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


class Responds(Protocol):
    """What a workflow's responding node calls: a `Responder`, or one wrapping it (the proxy's timed one)."""

    def respond(self, *, system_prompt: str, prompt: str, conversation: Sequence[ChatMessage],
                max_tokens: int | None = None, context: Sequence[str] = (), endpoint_name: str | None = None,
                preset: str | None = None, on_text: Callable[[str], None] | None = None,
                sampling: Sampling | None = None) -> Response: ...


class Responder:
    def __init__(self, tasks: MemoryTasks) -> None:
        self.tasks = tasks

    def respond(self, *, system_prompt: str, prompt: str, conversation: Sequence[ChatMessage],
                max_tokens: int | None = None, context: Sequence[str] = (), endpoint_name: str | None = None,
                preset: str | None = None, on_text: Callable[[str], None] | None = None,
                sampling: Sampling | None = None) -> Response:
        """`on_text`: receives the answer's text as the model produces it (the response streamed to the user).
        `sampling`: the front end's samplers (see `MemoryTasks.respond`)."""
        result = self.tasks.respond(
            _lines(conversation), prompt=prompt, system_prompt=system_prompt or None, context=context,
            max_tokens=max_tokens or d.MAX_RESPONSE_SIZE_IN_TOKENS, endpoint_name=endpoint_name, preset=preset,
            on_text=on_text, sampling=sampling,
        )
        return Response(result.value, result.llm)


def _lines(conversation: Sequence[ChatMessage]) -> list[ChatLine]:
    return [
        ChatLine(role=m.role, content=m.content, seq=m.seq or i, ts_us=m.ts_us, message_id=m.message_id, name=m.name)
        for i, m in enumerate(conversation)
    ]

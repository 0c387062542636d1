"""A completion streamed to a front door: run in a worker thread, its text delivered to the event loop as it comes.

Every streaming front door (`/v1/chat/completions`, `/v1/completions` as server-sent events; `/api/chat`,
`/api/generate` as Ollama's NDJSON) frames the same events: `("text", delta)` as the model produces them,
then `("done", CompletionResponse)` or `("error", exception)`. The stream starts with the reply's first text: a
request refused before it is a plain error with its status (`first()` raises it). A client that goes away
mid-stream stops the model's call at its next delta; the reply is then not appended (`ReplyAbandoned`).
"""

from __future__ import annotations

import asyncio
import threading

from engram.api import types as t
from engram.api.errors import translate


def refusal(exc: BaseException) -> BaseException:
    """The ApiError an operation's exception means (the exception itself when it is not the caller's doing)."""
    return translate(exc) or exc


class Trimmed:
    """A reply's text deltas as the client sees them. The reply is appended trimmed, so the stream is too: leading
    whitespace is dropped, trailing whitespace held back until more text follows it (joined, the deltas are the
    appended reply)."""

    def __init__(self) -> None:
        self.started = False
        self._held = ""

    def __call__(self, text: str) -> str:
        if not self.started:
            text = text.lstrip()
            if not text:
                return ""
            self.started = True
        text = self._held + text
        body = text.rstrip()
        self._held = text[len(body):]
        return body


class Untrimmed:
    """A text continuation's deltas as the model sends them (a forwarded text prompt's reply is not trimmed)."""

    def __init__(self) -> None:
        self.started = False

    def __call__(self, text: str) -> str:
        self.started = self.started or bool(text)
        return text


class ReplyStream:
    """`api.complete(agent, body)` in a worker thread; `first()` then `events()` on the event loop."""

    def __init__(self, api, agent: str, body: t.CompletionRequest, *, trim: bool = True):
        from engram.api.completions import Timing

        self.api, self.agent, self.body = api, agent, body
        self.trim = Trimmed() if trim else Untrimmed()
        self.timing = Timing()
        self._gone = threading.Event()  # the client disconnected: the next delta stops the model's call
        self._events: asyncio.Queue = asyncio.Queue()
        self._first = None

    def _run(self, loop) -> None:
        from engram.api.completions import ReplyAbandoned

        def put(kind: str, value) -> None:
            loop.call_soon_threadsafe(self._events.put_nowait, (kind, value))

        def on_text(text: str) -> None:
            if self._gone.is_set():
                raise ReplyAbandoned("the client disconnected mid-stream")
            text = self.trim(text)
            if text:
                put("text", text)

        try:
            put("done", self.api.complete(self.agent, self.body, on_text=on_text, timing=self.timing))
        except ReplyAbandoned:
            pass  # nobody listens; nothing was appended but the user's messages
        except BaseException as exc:  # noqa: BLE001 - handed to the stream, which answers it
            put("error", exc)

    async def first(self) -> tuple[float, float]:
        """Start, and wait for the reply's first text (or its end): the (memory_ms, llm_ms) until then. A refusal
        before it is raised (as its ApiError)."""
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._run, args=(loop,), name="proxy-stream", daemon=True).start()
        kind, value = self._first = await self._events.get()
        if kind == "error":
            raise refusal(value) from None
        return (value.memory_ms, value.llm_ms) if kind == "done" else self.timing.at_now()

    async def events(self):
        """The events after `first()`, the first one included, up to the final "done" or "error". If the consumer
        stops before the end (the client went away), the model's call is stopped."""
        finished = False
        kind, value = self._first
        try:
            while True:
                if kind == "done" and not self.trim.started and value.reply:
                    yield "text", value.reply  # a workflow whose reply was not streamed (no returnToUser node)
                yield kind, value
                if kind != "text":
                    finished = True
                    return
                kind, value = await self._events.get()
        finally:
            if not finished:
                self._gone.set()

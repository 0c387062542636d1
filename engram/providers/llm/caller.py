"""The Messages API through the official `anthropic` SDK: one request, retried as the endpoint says.

The SDK's own retries are switched off (`max_retries=0`) so that engram's endpoint configuration
decides everything: which failures are retried (429, 408/409, 5xx, 529 overloaded, timeouts,
connection errors), how long to back off, how far to trust `retry-after`, and how many attempts
a call may take. Every outcome says how many attempts it took, for provenance.
"""

from __future__ import annotations

import json
import random
import re
import time
from typing import Any, Callable, TypeVar

import anthropic
import msgspec
from engram.config.llm import Endpoint, Preset
from engram.providers.endpoints.client import retry_after_seconds
from engram.providers.endpoints.wire import CallFailed, Completion, Request, Sampling, claude_schema

R = TypeVar("R")

# Statuses worth another attempt: timeouts (408), lock conflicts (409), rate limits (429), server errors (5xx, 529).
RETRY_STATUSES = frozenset({408, 409, 429})
# Backoff jitter: each delay is scaled by a factor in [1 - JITTER, 1] so that clients spread out.
JITTER = 0.25
# A 400 refusing the way a JSON answer was asked for (output_config.format, tools): step down, do not fail.
_REFUSED = re.compile(r"output_config|output_format|json_schema|\bformat\b|tool_choice|tools", re.I)


CLAUDE_WAYS = ("outputFormat", "tool")
RECORDED_WAYS = {"outputFormat": "output_format", "tool": "tool", "none": "prompt"}
def completion_of(message: Any, tool: bool = False) -> Completion:
    """A Completion from an SDK `Message` (thinking blocks are not the answer; a forced tool's input is, as JSON)."""
    if tool:
        inputs = [getattr(b, "input", None) for b in message.content if getattr(b, "type", "") == "tool_use"]
        text = json.dumps(inputs[0]) if inputs else ""
    else:
        text = "".join(getattr(block, "text", "") for block in message.content
                       if getattr(block, "type", "") == "text")
    usage = message.usage
    return Completion(
        text=text,
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
        stop_reason=message.stop_reason,
    )


def describe_status_error(exc: anthropic.APIStatusError) -> str:
    kind = getattr(exc, "type", None) or ""
    detail = getattr(exc, "api_message", None) or ""
    return " ".join(part for part in (f"HTTP {exc.status_code}", kind, detail) if part).strip()


class MessagesClient:
    """An `anthropic.Anthropic` client for one named endpoint, with engram's retry policy."""

    def __init__(
        self,
        endpoint: Endpoint,
        api_key: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        name: str = "default",
    ):
        self.endpoint = endpoint
        self.name = name
        # How JSON answers are asked for: the output format (json_schema), else forced tool use.
        configured = endpoint.structured_output
        self._ways = list(CLAUDE_WAYS) if configured == "auto" else [configured]
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.client = anthropic.Anthropic(
            api_key=api_key,
            base_url=endpoint.base_url,
            max_retries=0,
            timeout=endpoint.timeout_seconds,
        )

    def backoff(self, attempt: int) -> float:
        """Delay after failed attempt number `attempt` (1-based): exponential, capped, jittered."""
        e = self.endpoint
        delay = min(e.retry_initial_delay_seconds * (2 ** (attempt - 1)), e.retry_max_delay_seconds)
        return delay * (1.0 - JITTER * self._rng.random())

    def with_retries(self, call: Callable[[], R], retryable: Callable[[], bool] = lambda: True) -> tuple[R, int]:
        """`call()` retried per the endpoint; returns its value and the attempts it took. `retryable()` False after
        a failure (a streamed answer that had started reaching the user): no retry, the failure is final."""
        attempts = 0
        while True:
            attempts += 1
            wait: float | None = None
            try:
                return call(), attempts
            except anthropic.APIStatusError as exc:
                error = describe_status_error(exc)
                if not retryable():
                    raise CallFailed(f"{error} (the answer had started streaming)", attempts, transient=True) from None
                if exc.status_code not in RETRY_STATUSES and exc.status_code < 500:
                    kind = "refused_structured" if exc.status_code == 400 and _REFUSED.search(error) else None
                    if exc.status_code in (401, 403):
                        kind = "auth"
                    raise CallFailed(error, attempts, kind=kind) from None
                wait = retry_after_seconds(exc.response.headers)
                if wait is not None and wait > self.endpoint.max_retry_after_seconds:
                    raise CallFailed(
                        f"{error}: retry-after {wait:g}s exceeds maxRetryAfterSeconds "
                        f"({self.endpoint.max_retry_after_seconds:g}s)",
                        attempts,
                        transient=True,
                    ) from None
            except anthropic.APITimeoutError:
                error = f"timeout after {self.endpoint.timeout_seconds:g}s"
            except anthropic.APIConnectionError as exc:
                error = f"connection error: {exc.__cause__ or exc}"
            if not retryable():
                raise CallFailed(f"{error} (the answer had started streaming)", attempts, transient=True)
            if attempts > self.endpoint.max_retries:
                raise CallFailed(f"{error} (gave up after {attempts} attempts)", attempts, transient=True)
            self._sleep(wait if wait is not None else self.backoff(attempts))

    def who(self) -> str:
        return f"endpoint {self.name!r} (claudeMessages {self.endpoint.model})"

    def window(self) -> tuple[int | None, str | None]:
        n = self.endpoint.max_context_tokens
        return n, ("maxContextTokens" if n else None)

    @property
    def way(self) -> str:
        return self._ways[0]

    def create(self, request: Request) -> tuple[Completion, int]:
        """One Messages API call; raises CallFailed when every allowed attempt failed. A JSON answer is asked for
        as an output format, or by forced tool use where the model refuses that (one step down, remembered)."""
        while True:
            way = self.way if request.structured is not None else "none"
            params = request.params()
            extra = {key: params.pop(key) for key in ("temperature", "output_config") if key in params}
            structured = request.structured
            if structured is not None and way != "outputFormat":  # the format goes only the outputFormat way
                config = {k: v for k, v in extra.pop("output_config", {}).items() if k != "format"}
                if config:
                    extra["output_config"] = config
            if structured is not None and way == "tool":
                params["tools"] = [{"name": structured.name, "description": "Record the answer.",
                                    "input_schema": claude_schema(structured.schema)}]
                params["tool_choice"] = {"type": "tool", "name": structured.name}

            def call() -> Completion:
                # temperature (and output_config.format) travel in the body, outside the SDK's typed signature.
                message = self.client.messages.create(**params, extra_body=extra or None)
                c = completion_of(message, tool=way == "tool")
                return msgspec.structs.replace(c, structured=RECORDED_WAYS.get(way) if structured else None)

            try:
                return self.with_retries(call)
            except CallFailed as failed:
                refused = structured is not None and failed.kind == "refused_structured" and len(self._ways) > 1
                if not refused:
                    raise
                if self._ways[0] == way:
                    self._ways.pop(0)

    def stream(self, request: Request, on_text: Callable[[str], None]) -> tuple[Completion, int]:
        """One Messages API call streamed (`messages.stream`): each text delta goes to `on_text` as it arrives.
        Retried as `create` until the first delta; a failure after it is final (a retry would repeat text the
        caller has passed on). An exception raised by `on_text` (the caller stopped listening) ends the call
        and the HTTP response, and propagates."""
        params = request.params()
        extra = {key: params.pop(key) for key in ("temperature",) if key in params}
        started = False

        def call() -> Completion:
            nonlocal started
            with self.client.messages.stream(**params, extra_body=extra or None) as events:
                for text in events.text_stream:
                    if text:
                        started = True
                        on_text(text)
                return completion_of(events.get_final_message())

        return self.with_retries(call, retryable=lambda: not started)


def request_for(
    endpoint: Endpoint, preset: Preset, *, system: str, messages: tuple[tuple[str, str], ...], max_tokens: int
) -> Request:
    return Request(
        model=endpoint.model,
        system=system,
        messages=messages,
        max_tokens=max_tokens,
        temperature=preset.temperature,
        effort=preset.effort,
        cache_system=endpoint.prompt_caching,
    )

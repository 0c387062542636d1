"""The Messages API through the official `anthropic` SDK: one request, retried as the endpoint says.

The SDK's own retries are switched off (`max_retries=0`) so that engram's endpoint configuration
decides everything: which failures are retried (429, 408/409, 5xx, 529 overloaded, timeouts,
connection errors), how long to back off, how far to trust `retry-after`, and how many attempts
a call may take. Every outcome says how many attempts it took, for provenance.
"""

from __future__ import annotations

import email.utils
import random
import time
from typing import Any, Callable, TypeVar

import anthropic
import msgspec

from engram.config.llm import Endpoint, Preset

R = TypeVar("R")

# Statuses worth another attempt: timeouts (408), lock conflicts (409), rate limits (429), server errors (5xx, 529).
RETRY_STATUSES = frozenset({408, 409, 429})
# Backoff jitter: each delay is scaled by a factor in [1 - JITTER, 1] so that clients spread out.
JITTER = 0.25


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """One Messages API request, as plain data (it is also a Message Batch request's `params`)."""

    model: str
    system: str
    messages: tuple[tuple[str, str], ...]  # (role, text)
    max_tokens: int
    temperature: float | None = None
    effort: str | None = None
    cache_system: bool = True

    def params(self) -> dict[str, Any]:
        system_block: dict[str, Any] = {"type": "text", "text": self.system}
        if self.cache_system:
            # The system prompt of a task never changes between calls: cache it. The API caches
            # only prefixes above a model-dependent minimum (512-4096 tokens); shorter prompts,
            # like the shipped defaults, are sent normally and billed at the base rate.
            system_block["cache_control"] = {"type": "ephemeral"}
        out: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [system_block],
            "messages": [{"role": role, "content": text} for role, text in self.messages],
        }
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.effort is not None:
            out["output_config"] = {"effort": self.effort}
        return out


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    input_tokens: int  # uncached input tokens, as the API counts them
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stop_reason: str | None = None


class CallFailed(Exception):
    """The request failed for good (not retryable, or out of attempts).

    `transient`: an outage (timeouts, connection errors, 429, 5xx, overloaded) rather than a request the
    endpoint refuses (400, 401): the same request may well succeed later."""

    def __init__(self, error: str, attempts: int, *, transient: bool = False):
        super().__init__(error)
        self.error = error
        self.attempts = attempts
        self.transient = transient


def completion_of(message: Any) -> Completion:
    """A Completion from an SDK `Message` (thinking and tool blocks are not the answer)."""
    text = "".join(getattr(block, "text", "") for block in message.content if getattr(block, "type", "") == "text")
    usage = message.usage
    return Completion(
        text=text,
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
        stop_reason=message.stop_reason,
    )


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a response asks for: `retry-after-ms`, `retry-after` in seconds, or an HTTP date."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        now = email.utils.parsedate_to_datetime(headers["date"]) if headers.get("date") else None
    except (TypeError, ValueError):
        return None
    # Relative to the server's own clock when it sent one; a wall-clock read only as a last resort.
    base = now.timestamp() if now is not None else time.time()
    return max(0.0, when.timestamp() - base)


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
    ):
        self.endpoint = endpoint
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
                    raise CallFailed(error, attempts) from None
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

    def create(self, request: Request) -> tuple[Completion, int]:
        """One Messages API call; raises CallFailed when every allowed attempt failed."""
        params = request.params()
        extra = {key: params.pop(key) for key in ("temperature",) if key in params}

        def call() -> Completion:
            # temperature is not in the SDK's typed signature (>= 1.0); it travels in the body.
            return completion_of(self.client.messages.create(**params, extra_body=extra or None))

        return self.with_retries(call)

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

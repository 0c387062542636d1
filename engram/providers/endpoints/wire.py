"""Wire-neutral values of one LLM call: what engram asks, what comes back, how it failed. No I/O."""

from __future__ import annotations

from typing import Any

import msgspec


class Structured(msgspec.Struct, frozen=True):
    """A JSON answer asked for: its name and (bounded) JSON schema."""

    name: str
    schema: dict[str, Any]


# The name of a JSON answer of any shape (Ollama's `"format": "json"`): an Ollama upstream gets "json", the others
# the schema of any JSON object.
ANY_JSON = "json"


class Asks(msgspec.Struct, frozen=True, kw_only=True):
    """What a front end asks of the reply's call beyond its messages and samplers (the Ollama door's `format`,
    `keep_alive`, `options`, `images`). Which upstream types take which: `adapters.refused_asks`."""

    format: Structured | None = None  # the front end's JSON schema, or ANY_JSON
    keep_alive: str | float | None = None  # an Ollama upstream's keep_alive (no other server unloads its model)
    num_ctx: int | None = None  # the window the front end wants: the call's, when smaller than the endpoint's
    options: tuple[tuple[str, Any], ...] = ()  # Ollama options beyond the samplers and num_ctx, in Ollama's names
    images: tuple[str, ...] = ()  # base64 images, sent with the user turn the model answers


class Sampling(msgspec.Struct, frozen=True, kw_only=True):
    """Sampler values (WilmerAI's canonical names); None: not sent (the server's default). `asks`: the front end's
    other wishes for the same call (never a preset's)."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    asks: Asks | None = None

    def over(self, base: "Sampling") -> "Sampling":
        """These values where set, `base`'s elsewhere."""
        return Sampling(
            temperature=self.temperature if self.temperature is not None else base.temperature,
            top_p=self.top_p if self.top_p is not None else base.top_p,
            top_k=self.top_k if self.top_k is not None else base.top_k,
            max_tokens=self.max_tokens if self.max_tokens is not None else base.max_tokens,
            stop=self.stop or base.stop,
            seed=self.seed if self.seed is not None else base.seed,
            asks=self.asks or base.asks,
        )


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """One LLM request, as plain data (for claudeMessages it is also a Message Batch request's `params`)."""

    model: str
    system: str
    messages: tuple[tuple[str, str], ...]  # (role, text)
    max_tokens: int
    temperature: float | None = None
    effort: str | None = None
    cache_system: bool = True
    sampling: Sampling | None = None  # top_p, top_k, stop, seed (temperature/max_tokens above win when set)
    structured: Structured | None = None  # a JSON answer: asked for the endpoint's way
    # A text prompt sent as it is to a text-completion type (the front end formatted it); a chat type reads it
    # as one more user turn.
    prompt: str | None = None
    # The front end's other wishes (the Ollama door): keep_alive, options, images; its `format` is `structured`.
    asks: Asks | None = None
    window: int | None = None  # the call's own context window (the front end's num_ctx), smaller than the endpoint's

    def params(self) -> dict[str, Any]:
        """The Messages API body (claudeMessages)."""
        system_block: dict[str, Any] = {"type": "text", "text": self.system}
        if self.cache_system:
            # The system prompt of a task never changes between calls: cache it. The API caches
            # only prefixes above a model-dependent minimum (512-4096 tokens); shorter prompts,
            # like the shipped defaults, are sent normally and billed at the base rate.
            system_block["cache_control"] = {"type": "ephemeral"}
        messages = [{"role": role, "content": text} for role, text in self.messages]
        if self.prompt is not None:
            messages.append({"role": "user", "content": self.prompt})
        out: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [system_block] if self.system else [],
            "messages": messages,
        }
        if not self.system:
            del out["system"]
        if self.temperature is not None:
            out["temperature"] = self.temperature
        s = self.sampling
        if s is not None:
            if s.top_p is not None:
                out["top_p"] = s.top_p
            if s.top_k is not None:
                out["top_k"] = s.top_k
            if s.stop:
                out["stop_sequences"] = list(s.stop)
        if self.effort is not None:
            out["output_config"] = {"effort": self.effort}
        if self.structured is not None:  # a JSON answer: the output format (a batch request asks the same way)
            out["output_config"] = {**out.get("output_config", {}),
                                    "format": {"type": "json_schema", "schema": claude_schema(self.structured.schema)}}
        return out


# JSON-schema keywords the Messages API's structured outputs do not take (engram's bounds are for local decoders).
_CLAUDE_UNSUPPORTED = ("maxLength", "minLength", "maxItems", "minItems", "minimum", "maximum")


def claude_schema(schema: Any) -> Any:
    """`schema` as the Messages API takes it (output_config.format, a tool's input_schema)."""
    if isinstance(schema, dict):
        return {k: claude_schema(v) for k, v in schema.items() if k not in _CLAUDE_UNSUPPORTED}
    if isinstance(schema, list):
        return [claude_schema(v) for v in schema]
    return schema


class Completion(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    input_tokens: int  # uncached input tokens, as the API counts them
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stop_reason: str | None = None
    model: str | None = None  # what the server said it answered as
    structured: str | None = None  # the way the JSON answer was asked for (LlmCall.structured)
    usage_estimated: bool = False  # the server sent no usage (streams of llama-cpp-python, KoboldCpp)


class CallFailed(Exception):
    """The request failed for good (not retryable, or out of attempts).

    `transient`: an outage (timeouts, connection errors, 429, 5xx, overloaded) rather than a request the
    endpoint refuses (400, 401): the same request may well succeed later. `kind`: what the endpoint said, when
    known ("context", "model_missing", "auth", "refused_structured", "not_found")."""

    def __init__(self, error: str, attempts: int, *, transient: bool = False, kind: str | None = None):
        super().__init__(error)
        self.error = error
        self.attempts = attempts
        self.transient = transient
        self.kind = kind

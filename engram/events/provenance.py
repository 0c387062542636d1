"""Where a recorded LLM output came from. Travels inside the event the output produced."""

from __future__ import annotations

import msgspec


class LlmCall(msgspec.Struct, frozen=True, kw_only=True):
    """Provenance of one memory task: which provider and model, what it cost, how long it took.

    `model` of the offline provider always starts with "offline-heuristic": it is a heuristic,
    not a language model, and says so wherever its output is stored. `input_tokens` counts the
    whole prompt, cached parts included; `cost_usd` prices each part at its own rate.
    """

    provider: str
    model: str
    task: str
    prompt_hash: str
    endpoint: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    error: str | None = None  # set when the call failed and a recorded fallback was used
    # Added with the LLM layer (defaults keep older payloads valid):
    fallback: str | None = None  # the model (e.g. "offline-heuristic-v1") whose output stands in after a failure
    attempts: int = 1  # HTTP attempts, retries included (plus one for a JSON repair request)
    cache_read_tokens: int = 0  # of input_tokens: read from the prompt cache
    cache_write_tokens: int = 0  # of input_tokens: written to the prompt cache
    batch_id: str | None = None  # the Message Batch that answered, for bulk regeneration
    # Added with endpoint API types (issue 25): how a JSON answer was asked for ("json_schema", "json_object_schema",
    # "ollama_format", "grammar", "output_format", "tool", "prompt"; None: a free-form answer), whether it needed the
    # repair request, and whether the token counts are engram's estimate (the server streamed no usage).
    structured: str | None = None
    repaired: bool = False
    usage_estimated: bool = False
    # A server the user runs (the endpoint's `local`): its cost is 0 and the cost view says "local", not a price.
    local: bool = False

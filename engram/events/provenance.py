"""Where a recorded LLM output came from. Travels inside the event the output produced."""

from __future__ import annotations

import msgspec


class LlmCall(msgspec.Struct, frozen=True, kw_only=True):
    """Provenance of one memory task: which provider and model, what it cost, how long it took.

    `model` of the offline provider always starts with "offline-heuristic": it is a heuristic,
    not a language model, and says so wherever its output is stored.
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

"""What an LLM call cost, from a per-model price table (USD per million tokens).

Every task result records `cost_usd` in its LlmCall, which travels inside the event it produced;
so cost and tokens per agent are plain SQL over the log, e.g.

    SELECT agent,
           sum(CAST(json_extract(payload, '$.llm.cost_usd') AS DOUBLE))       AS usd,
           sum(CAST(json_extract(payload, '$.llm.input_tokens') AS BIGINT))   AS input_tokens,
           sum(CAST(json_extract(payload, '$.llm.output_tokens') AS BIGINT))  AS output_tokens
    FROM events WHERE json_extract(payload, '$.llm') IS NOT NULL
    GROUP BY agent

(`COST_PER_AGENT_SQL` below.) Prices are list prices from platform.claude.com/docs/en/about-claude/pricing
(November 2026) and platform.openai.com/docs/pricing for OpenAI's models; `LlmConfig.prices` extends or overrides
them. A model missing from the table is recorded at cost 0 with a warning, never guessed; a model on an endpoint
the user runs (Ollama, KoboldCpp, a llama.cpp or vLLM server on a loopback or private address, or `local: true`)
is "local": cost 0, no warning.
"""

from __future__ import annotations

import logging

from engram.config.llm import ModelPrice

log = logging.getLogger(__name__)

# Prompt-cache multiples of the base input price (5-minute cache writes; reads are hits).
CACHE_WRITE_MULTIPLIER = 1.25
CACHE_READ_MULTIPLIER = 0.1
# The Message Batches API bills input and output at half price.
BATCH_DISCOUNT = 0.5


def _p(inp: float, out: float, read: float | None = None) -> ModelPrice:
    return ModelPrice(input_per_mtok=inp, output_per_mtok=out, cache_read_per_mtok=read)


def _o(inp: float, out: float, read: float) -> ModelPrice:
    return ModelPrice(input_per_mtok=inp, output_per_mtok=out, cache_read_per_mtok=read, cache_write_per_mtok=inp)


# Keys match a model name exactly or as a prefix (dated snapshots such as "claude-haiku-4-5-20251001").
PRICES: dict[str, ModelPrice] = {
    "claude-fable-5-1": _p(10.0, 50.0, 0.25),
    "claude-mythos-5-1": _p(10.0, 50.0, 0.25),
    "claude-fable-5": _p(10.0, 50.0, 1.0),
    "claude-mythos-5": _p(10.0, 50.0, 1.0),
    "claude-opus-5-5": _p(4.0, 20.0, 0.2),
    "claude-opus-5": _p(5.0, 25.0, 0.5),
    "claude-opus-4-8": _p(5.0, 25.0, 0.5),
    "claude-opus-4-7": _p(5.0, 25.0, 0.5),
    "claude-opus-4-6": _p(5.0, 25.0, 0.5),
    "claude-opus-4-5": _p(5.0, 25.0, 0.5),
    "claude-opus-4-1": _p(15.0, 75.0, 1.5),
    "claude-opus-4": _p(15.0, 75.0, 1.5),
    "claude-sonnet-5-5": _p(2.0, 10.0, 0.2),
    "claude-sonnet-5": _p(2.0, 10.0, 0.2),
    "claude-sonnet-4-6": _p(3.0, 15.0, 0.3),
    "claude-sonnet-4-5": _p(3.0, 15.0, 0.3),
    "claude-sonnet-4": _p(3.0, 15.0, 0.3),
    # Haiku 5.5 has a higher tier for prompts over 100K tokens; memory tasks stay far below it.
    "claude-haiku-5-5": _p(0.1, 0.5, 0.01),
    "claude-haiku-4-5": _p(1.0, 5.0, 0.1),
    "claude-3-5-haiku": _p(0.8, 4.0, 0.08),
    # OpenAI (openAIChatCompletion / openAIV1Completion at api.openai.com; platform.openai.com/docs/pricing). OpenAI
    # bills no cache writes (cached input is read at the third column's rate).
    "gpt-5": _o(1.25, 10.0, 0.125),
    "gpt-5-mini": _o(0.25, 2.0, 0.025),
    "gpt-5-nano": _o(0.05, 0.4, 0.005),
    "gpt-4.1": _o(2.0, 8.0, 0.5),
    "gpt-4.1-mini": _o(0.4, 1.6, 0.1),
    "gpt-4.1-nano": _o(0.1, 0.4, 0.025),
    "gpt-4o": _o(2.5, 10.0, 1.25),
    "gpt-4o-mini": _o(0.15, 0.6, 0.075),
    "gpt-4-turbo": _o(10.0, 30.0, 10.0),
    "o3": _o(2.0, 8.0, 0.5),
    "o4-mini": _o(1.1, 4.4, 0.275),
    "gpt-3.5-turbo-instruct": _o(1.5, 2.0, 1.5),
}
# An endpoint the user runs (`local`: inferred for Ollama and KoboldCpp types and loopback or private hosts) costs
# nothing: its calls record cost_usd 0 under this name, never "no price known".
LOCAL = "local"

COST_PER_AGENT_SQL = """
SELECT agent,
       count(*)                                                          AS calls,
       sum(CAST(json_extract(payload, '$.llm.cost_usd') AS DOUBLE))      AS usd,
       sum(CAST(json_extract(payload, '$.llm.input_tokens') AS BIGINT))  AS input_tokens,
       sum(CAST(json_extract(payload, '$.llm.output_tokens') AS BIGINT)) AS output_tokens
FROM events
WHERE json_extract(payload, '$.llm') IS NOT NULL
  AND json_extract(payload, '$.llm') != 'null'
GROUP BY agent
ORDER BY agent
"""

_warned: set[str] = set()


def price_of(model: str, overrides: dict[str, ModelPrice] | None = None) -> ModelPrice | None:
    """The price of `model`: an exact key first, else the longest key that prefixes it."""
    table = {**PRICES, **(overrides or {})}
    if model in table:
        return table[model]
    matches = [key for key in table if model.startswith(key)]
    return table[max(matches, key=len)] if matches else None


def cost_usd(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    batch: bool = False,
    overrides: dict[str, ModelPrice] | None = None,
) -> float:
    """USD of one call. `input_tokens` are the uncached input tokens (the API's `input_tokens`)."""
    price = price_of(model, overrides)
    if price is None:
        if model not in _warned:
            _warned.add(model)
            log.warning("no price known for model %r: its calls are recorded at cost 0 (add it to llm.prices)", model)
        return 0.0
    write = price.cache_write_per_mtok if price.cache_write_per_mtok is not None else price.input_per_mtok * CACHE_WRITE_MULTIPLIER
    read = price.cache_read_per_mtok if price.cache_read_per_mtok is not None else price.input_per_mtok * CACHE_READ_MULTIPLIER
    usd = (
        input_tokens * price.input_per_mtok
        + output_tokens * price.output_per_mtok
        + cache_write_tokens * write
        + cache_read_tokens * read
    ) / 1_000_000
    if batch:
        usd *= BATCH_DISCOUNT
    return round(usd, 8)

"""LLM endpoints, presets, task routes and the embedder: named in configuration, as WilmerAI names them."""

from __future__ import annotations

import difflib
from typing import Literal

from pydantic import Field, model_validator

from engram.config.base import ConfigModel

# Every memory task of engram.providers.llm, by the name that routes, prompt files and `LlmCall.task` use.
MEMORY_TASKS = (
    "summarize_chunk",
    "merge_summary",
    "extract_memory",
    "observe",
    "reflect",
    "extract_facts",
    "summarize_schema",
    "hyde",
    "compact",
    "respond",
)

# The current Sonnet as of this writing (claude-sonnet-4-5 reached end of life on 2026-11-30).
DEFAULT_MODEL = "claude-sonnet-5-5"


class Endpoint(ConfigModel):
    """A named LLM endpoint (WilmerAI's `endpointName`)."""

    provider: Literal["anthropic", "offline"] = "anthropic"
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    timeout_seconds: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0)
    # Exponential backoff between retries (429 without retry-after, 5xx, 529 overloaded, timeouts).
    retry_initial_delay_seconds: float = Field(0.5, ge=0)
    retry_max_delay_seconds: float = Field(8.0, ge=0)
    # A 429 whose retry-after asks for longer than this is recorded as a failure instead of waited out.
    max_retry_after_seconds: float = Field(120.0, ge=0)
    # cache_control on the (stable) system prompt of every task.
    prompt_caching: bool = True


class Preset(ConfigModel):
    """A named sampling preset (WilmerAI's `preset`).

    `temperature` is sent only when set: anthropic SDK >= 1 dropped it from the typed signature
    (it travels in the request body), and newer models reject non-default sampling values.
    """

    temperature: float | None = Field(None, ge=0.0, le=1.0)
    max_tokens: int = Field(1024, gt=0)
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None


class TaskRoute(ConfigModel):
    """Which endpoint and preset a memory task uses (WilmerAI's endpointName/preset/maxResponseSizeInTokens)."""

    endpoint_name: str = "default"
    preset: str = "default"
    # None: the preset's max_tokens (or the size the caller asks for).
    max_response_size_in_tokens: int | None = Field(None, gt=0)


class ModelPrice(ConfigModel):
    """USD per million tokens. Cache rates default to the usual multiples of the input rate."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cache_write_per_mtok: float | None = Field(None, ge=0)
    cache_read_per_mtok: float | None = Field(None, ge=0)


class BatchSettings(ConfigModel):
    """Message Batches (bulk regeneration)."""

    poll_interval_seconds: float = Field(30.0, ge=0)
    # Requests per submitted batch; keeps each recorded submission well under the event size limit.
    max_requests_per_batch: int = Field(500, gt=0)


class LlmConfig(ConfigModel):
    # auto: anthropic when the default endpoint's API key variable is set, else the offline heuristic provider.
    provider: Literal["auto", "anthropic", "offline"] = "auto"
    endpoints: dict[str, Endpoint] = {"default": Endpoint()}
    presets: dict[str, Preset] = {"default": Preset()}
    # Per memory task (keys from MEMORY_TASKS); tasks not listed use the "default" endpoint and preset.
    tasks: dict[str, TaskRoute] = {}
    # A directory of prompt templates overriding the defaults file by file (same file names).
    prompts_dir: str | None = None
    # Extends or overrides the built-in price table (keys: model names or name prefixes).
    prices: dict[str, ModelPrice] = {}
    batches: BatchSettings = BatchSettings()

    @model_validator(mode="after")
    def _routes_name_what_exists(self) -> "LlmConfig":
        if "default" not in self.endpoints or "default" not in self.presets:
            raise ValueError('endpoints and presets must each include one named "default"')
        unknown = sorted(set(self.tasks) - set(MEMORY_TASKS))
        if unknown:
            raise ValueError(f"unknown memory task(s) {unknown}; known: {list(MEMORY_TASKS)}")
        for task, route in self.tasks.items():
            problem = self.route_problem(route.endpoint_name, route.preset)
            if problem:
                raise ValueError(f"task {task!r} names {problem}")
        return self

    def route_problem(self, endpoint_name: str | None, preset: str | None) -> str | None:
        """Why a call cannot be routed to `endpoint_name` / `preset` (None: both configured, or not named).

        Reads after "<who> names ...", and gives the closest configured name, so that a typo in a
        settings file or a workflow node says what was probably meant.
        """
        problems = []
        for kind, name, known, key in (
            ("endpoint", endpoint_name, self.endpoints, "llm.endpoints"),
            ("preset", preset, self.presets, "llm.presets"),
        ):
            if name is None or name in known:
                continue
            close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(
                f"{kind} {name!r}, which is not configured ({hint}configured: {', '.join(sorted(known))}; "
                f"configure it under {key} in engram.json)"
            )
        return " and ".join(problems) or None


class EmbedderConfig(ConfigModel):
    # auto: all-MiniLM-L6-v2 (ONNX) when installed, else the hashing fallback (which says so).
    name: Literal["auto", "minilm", "hashing"] = "auto"
    # Texts per model call. Small batches keep the int8 graph's activations in cache: on the 2-core
    # target, 8-32 cost a quarter to a third less CPU per text than 64 (bench/embed.py measures the sweep).
    batch_size: int = Field(16, gt=0)
    # onnxruntime intra-op threads; None: min(2, CPUs), which suits the 2-core target without starving Ray.
    threads: int | None = Field(None, gt=0)

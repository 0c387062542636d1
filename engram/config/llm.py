"""LLM endpoints, presets, task routes and the embedder: named in configuration, as WilmerAI names them."""

from __future__ import annotations

import difflib
from typing import Literal

from pydantic import AliasChoices, Field, field_validator, model_validator

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


# WilmerAI's endpoint API types (its `ApiTypes/*.json` `type`), plus "offline" (the labelled heuristic).
CHAT_API_TYPES = (
    "claudeMessages",
    "openAIChatCompletion",
    "openAIV1Completion",
    "ollamaApiChat",
    "ollamaApiGenerate",
    "koboldCppGenerate",
)
EMBEDDING_API_TYPES = ("openAIEmbeddings", "ollamaEmbeddings")
API_TYPES = CHAT_API_TYPES + EMBEDDING_API_TYPES + ("offline",)
# Types that only a server the user runs speaks (no key, cost 0, one request at a time by default).
LOCAL_API_TYPES = ("ollamaApiChat", "ollamaApiGenerate", "koboldCppGenerate", "ollamaEmbeddings")
# The ways of asking for JSON (strongest first per type in engram.providers.endpoints.adapters).
STRUCTURED_WAYS = ("auto", "jsonSchema", "jsonObjectSchema", "ollamaFormat", "grammar", "outputFormat", "tool", "none")
# Built-in prompt templates for the text-completion types (WilmerAI's PromptTemplates).
PROMPT_TEMPLATES = ("chatml", "llama3", "mistral", "gemma", "alpaca", "phi-4")
DEFAULT_BASE_URLS = {
    "openAIChatCompletion": "https://api.openai.com",
    "openAIV1Completion": "https://api.openai.com",
    "openAIEmbeddings": "https://api.openai.com",
    "ollamaApiChat": "http://127.0.0.1:11434",
    "ollamaApiGenerate": "http://127.0.0.1:11434",
    "ollamaEmbeddings": "http://127.0.0.1:11434",
    "koboldCppGenerate": "http://127.0.0.1:5001",
}


def _closest(value: str, known: tuple[str, ...], what: str) -> str:
    close = difflib.get_close_matches(value, list(known), n=1, cutoff=0.4)
    if not close:
        lowered = {k.lower(): k for k in known}
        close = [lowered[value.lower()]] if value.lower() in lowered else []
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown {what} {value!r} ({hint}known: {', '.join(known)})"


class PromptTemplate(ConfigModel):
    """A prompt template for models served without a chat template (WilmerAI's PromptTemplates keys)."""

    prompt_template_system_prefix: str = ""
    prompt_template_system_suffix: str = ""
    prompt_template_user_prefix: str = ""
    prompt_template_user_suffix: str = ""
    prompt_template_assistant_prefix: str = ""
    prompt_template_assistant_suffix: str = ""
    prompt_template_end_token: str = ""


def _is_private_host(url: str) -> bool:
    import ipaddress
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "host.docker.internal") or host.endswith(".local") or host.endswith(".lan"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


class Endpoint(ConfigModel):
    """A named LLM endpoint (WilmerAI's `endpointName`): where it is, what it speaks, how to call it."""

    api_type: str = "claudeMessages"
    # Before apiType existed: "anthropic" = claudeMessages, "offline" = offline. Still read; a conflict is an error.
    provider: Literal["anthropic", "offline"] | None = None
    # The model name sent to the server (WilmerAI's modelNameToSendToAPI); "" sends none (dontIncludeModel).
    model: str = ""
    base_url: str | None = None
    # The environment variable holding the API key (never the key itself). Default: ANTHROPIC_API_KEY for
    # claudeMessages, OPENAI_API_KEY for the OpenAI types at api.openai.com, none for a server the user runs.
    api_key_env: str | None = None
    # Extra HTTP headers sent with every request (values are never logged).
    headers: dict[str, str] = {}
    timeout_seconds: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0)
    # Exponential backoff between retries (429 without retry-after, 5xx, 529 overloaded, timeouts).
    retry_initial_delay_seconds: float = Field(0.5, ge=0)
    retry_max_delay_seconds: float = Field(8.0, ge=0)
    # A 429 whose retry-after asks for longer than this is recorded as a failure instead of waited out.
    max_retry_after_seconds: float = Field(120.0, ge=0)
    # cache_control on the (stable) system prompt of every task (claudeMessages).
    prompt_caching: bool = True
    # Requests in flight at once, across every process of the home (engram queues the rest). Default: 1 for a
    # server the user runs (a local server serves one to four at a time), 8 for a hosted API.
    max_concurrent_requests: int | None = Field(None, gt=0)
    # The context window in tokens. Ollama: read from /api/show when unset; KoboldCpp: /api/extra/true_max_context_length.
    max_context_tokens: int | None = Field(
        None, gt=0, validation_alias=AliasChoices("maxContextTokens", "maxContextTokenSize", "max_context_tokens")
    )
    # How JSON answers are asked for: "auto" = the strongest way the type supports, stepping down once if refused.
    structured_output: str = "auto"
    # openAIV1Completion, ollamaApiGenerate, koboldCppGenerate: a built-in name or WilmerAI's template keys.
    prompt_template: str | PromptTemplate = "chatml"
    # Ollama's keep_alive (e.g. "30m"); None: the server's default.
    keep_alive: str | None = None
    # Characters per token for sizing prompts (None: 4 for hosted APIs, 3 for local servers).
    chars_per_token: float | None = Field(None, gt=0)
    # A server the user runs: cost 0, no key needed. None: inferred (local API types, loopback/private hosts).
    local: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_provider(cls, data):
        if not isinstance(data, dict):
            return data
        provider = data.get("provider")
        api_type = data.get("apiType", data.get("api_type"))
        if provider is not None and api_type is not None:
            implied = {"anthropic": "claudeMessages", "offline": "offline"}.get(provider)
            if implied is not None and implied != api_type:
                raise ValueError(f'"provider": {provider!r} contradicts "apiType": {api_type!r}; keep only apiType')
        if provider == "offline" and api_type is None:
            data = {**data, "apiType": "offline"}
        return data

    @field_validator("api_type")
    @classmethod
    def _known_api_type(cls, value: str) -> str:
        if value not in API_TYPES:
            raise ValueError(_closest(value, API_TYPES, "apiType"))
        return value

    @field_validator("structured_output")
    @classmethod
    def _known_way(cls, value: str) -> str:
        if value not in STRUCTURED_WAYS:
            raise ValueError(_closest(value, STRUCTURED_WAYS, "structuredOutput"))
        return value

    @field_validator("prompt_template")
    @classmethod
    def _known_template(cls, value):
        if isinstance(value, str) and value not in PROMPT_TEMPLATES:
            raise ValueError(_closest(value, PROMPT_TEMPLATES, "promptTemplate"))
        return value

    @model_validator(mode="after")
    def _model_where_needed(self) -> "Endpoint":
        if not self.model and self.api_type in ("ollamaApiChat", "ollamaApiGenerate", "ollamaEmbeddings"):
            raise ValueError(f'an {self.api_type} endpoint needs "model" (the name `ollama list` shows)')
        if self.api_type == "claudeMessages" and not self.model:
            object.__setattr__(self, "model", DEFAULT_MODEL)
        return self

    @property
    def url(self) -> str:
        """The base URL (without a trailing slash and without a trailing /v1, which the adapters add)."""
        base = self.base_url or DEFAULT_BASE_URLS.get(self.api_type, "")
        base = base.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") and self.api_type.startswith("openAI") else base

    @property
    def key_env(self) -> str | None:
        """The environment variable of the API key, None when the endpoint needs no key."""
        if self.api_key_env is not None:
            return self.api_key_env or None
        if self.api_type == "claudeMessages":
            return "ANTHROPIC_API_KEY"
        if self.api_type.startswith("openAI") and not self.is_local and "api.openai.com" in self.url:
            return "OPENAI_API_KEY"
        return None

    @property
    def is_local(self) -> bool:
        """A server the user runs (cost 0, no key, one request at a time unless configured)."""
        if self.local is not None:
            return self.local
        if self.api_type == "offline" or self.api_type in LOCAL_API_TYPES:
            return True
        if self.api_type == "claudeMessages":
            return False  # the Messages API is Anthropic's (a proxy in front of it is still billed)
        return _is_private_host(self.url) if self.url else False

    @property
    def concurrency(self) -> int:
        if self.max_concurrent_requests is not None:
            return self.max_concurrent_requests
        return 1 if self.is_local else 8

    @property
    def tokens_per_char(self) -> float:
        return 1.0 / (self.chars_per_token or (3.0 if self.is_local else 4.0))


class Preset(ConfigModel):
    """A named sampling preset (WilmerAI's `preset`).

    `temperature` is sent only when set: anthropic SDK >= 1 dropped it from the typed signature
    (it travels in the request body), and newer models reject non-default sampling values.
    """

    temperature: float | None = Field(None, ge=0.0, le=2.0)
    # A cap on every answer routed through this preset when set (the proxy's reply: on the front end's max_tokens
    # and the workflow node's maxResponseSizeInTokens alike); None: no cap, and a task that states no size of its
    # own gets d.PRESET_MAX_TOKENS.
    max_tokens: int | None = Field(None, gt=0)
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=0)
    stop: tuple[str, ...] = ()
    seed: int | None = None
    # The proxy's reply: the front end's own samplers (temperature, top_p, max_tokens, stop) pass through
    # ("passThrough") unless this preset overrides them where it sets them ("override": the front end's max_tokens
    # is not used when the preset sets maxTokens).
    front_end_samplers: Literal["passThrough", "override"] = "passThrough"


class TaskRoute(ConfigModel):
    """Which endpoint and preset a memory task uses (WilmerAI's endpointName/preset/maxResponseSizeInTokens)."""

    endpoint_name: str = "default"
    preset: str = "default"
    # None: the size the caller asks for (or d.PRESET_MAX_TOKENS); the preset's maxTokens caps it either way.
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
    # endpoint: the server of `endpoint` (an llm.endpoints entry of apiType openAIEmbeddings or ollamaEmbeddings).
    name: Literal["auto", "minilm", "hashing", "endpoint"] = "auto"
    # With name "endpoint": the name of the endpoint under llm.endpoints.
    endpoint: str | None = None
    # With name "endpoint": that endpoint's settings, copied from llm.endpoints by ServiceConfig (so that a process
    # given only the embedder's settings, the home's embedder actor, can call it). Not written by users.
    endpoint_settings: Endpoint | None = None
    # Texts per model call. Small batches keep the int8 graph's activations in cache: on the 2-core
    # target, 8-32 cost a quarter to a third less CPU per text than 64 (bench/embed.py measures the sweep).
    batch_size: int = Field(16, gt=0)
    # onnxruntime intra-op threads; None: min(2, CPUs), which suits the 2-core target without starving Ray.
    threads: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _endpoint_named(self) -> "EmbedderConfig":
        if self.name == "endpoint" and not self.endpoint:
            raise ValueError('embedder "name": "endpoint" needs "endpoint": the name of an llm.endpoints entry of '
                             f'apiType {" or ".join(EMBEDDING_API_TYPES)}')
        if self.name != "endpoint" and self.endpoint is not None:
            raise ValueError(f'embedder "endpoint" is read only with "name": "endpoint" (the name is {self.name!r})')
        return self

    def resolved(self, endpoints: dict[str, Endpoint]) -> "EmbedderConfig":
        """This configuration with its endpoint's settings from `endpoints` (llm.endpoints); ValueError naming
        what to fix when the endpoint is not configured or does not serve embeddings."""
        if self.name != "endpoint":
            return self
        assert self.endpoint is not None
        found = endpoints.get(self.endpoint)
        if found is None:
            close = difflib.get_close_matches(self.endpoint, list(endpoints), n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"embedder endpoint {self.endpoint!r} is not configured ({hint}configured: "
                             f"{', '.join(sorted(endpoints))}; add it under llm.endpoints with apiType "
                             f"{' or '.join(EMBEDDING_API_TYPES)})")
        if found.api_type not in EMBEDDING_API_TYPES:
            raise ValueError(f"embedder endpoint {self.endpoint!r} has apiType {found.api_type!r}, which does not serve "
                             f"embeddings: set llm.endpoints.{self.endpoint}.apiType to "
                             f"{' or '.join(EMBEDDING_API_TYPES)}")
        if self.endpoint_settings is not None and self.endpoint_settings != found:
            raise ValueError("embedder endpointSettings is filled from llm.endpoints; do not write it")
        return self.model_copy(update={"endpoint_settings": found})

"""LLM endpoints, presets and the embedder: named in configuration, as WilmerAI names them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engram.config.base import ConfigModel


class Endpoint(ConfigModel):
    """A named LLM endpoint (WilmerAI's `endpointName`)."""

    provider: Literal["anthropic", "offline"] = "anthropic"
    model: str = "claude-sonnet-4-5"
    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"
    timeout_seconds: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0)


class Preset(ConfigModel):
    """A named sampling preset (WilmerAI's `preset`)."""

    temperature: float = Field(0.2, ge=0.0, le=1.0)
    max_tokens: int = Field(1024, gt=0)


class LlmConfig(ConfigModel):
    # auto: anthropic when ANTHROPIC_API_KEY is set, else the offline heuristic provider.
    provider: Literal["auto", "anthropic", "offline"] = "auto"
    endpoints: dict[str, Endpoint] = {"default": Endpoint()}
    presets: dict[str, Preset] = {"default": Preset()}


class EmbedderConfig(ConfigModel):
    # auto: all-MiniLM-L6-v2 (ONNX) when installed, else the hashing fallback (which says so).
    name: Literal["auto", "minilm", "hashing"] = "auto"
    batch_size: int = Field(64, gt=0)

"""The service configuration: where engram keeps its data, how it runs, and its limits.

Read from `<home>/engram.json` when present; `ENGRAM_HOME` and `RAY_ADDRESS` override.
"""

from __future__ import annotations

import os
from pathlib import Path

from typing import Annotated, Literal

from pydantic import Field, field_validator

from engram.config.base import ConfigModel
from engram.config.llm import EmbedderConfig, LlmConfig
from engram.config.loader import load

SERVICE_FILE_NAME = "engram.json"


class RaySettings(ConfigModel):
    address: str | None = None  # None: start a local Ray instance (the embedded default)
    namespace: str = "engram"
    num_cpus: int | None = Field(None, ge=1)
    # Past this, starting (or joining) Ray fails with a message saying what to do, instead of hanging.
    start_timeout_seconds: float = Field(120.0, gt=0)
    # Actors per shard for a policy group (`engram.policies.registry.GROUPS`), e.g. {"summarizer": 4}:
    # more members spread a group's logical actors (one Summarizer per discussion) over more processes.
    pools: dict[str, Annotated[int, Field(ge=1, le=64)]] = {}

    @field_validator("pools")
    @classmethod
    def _known_groups(cls, pools: dict[str, int]) -> dict[str, int]:
        from engram.policies.registry import GROUPS

        unknown = sorted(set(pools) - set(GROUPS))
        if unknown:
            raise ValueError(f"unknown policy group(s) {', '.join(unknown)}; the groups are {', '.join(GROUPS)}")
        return pools


class Limits(ConfigModel):
    max_message_chars: int = Field(100_000, gt=0)
    max_payload_bytes: int = Field(1 << 20, gt=0)
    max_batch_events: int = Field(20_000, gt=0)


class ServerSettings(ConfigModel):
    """`engram serve`: the long-lived process per home that owns Ray and the DuckDB files."""

    host: str = "127.0.0.1"  # loopback: nothing outside this machine reaches it
    port: int = Field(0, ge=0, le=65535)  # 0: a free port, recorded as `url` in <home>/instance.json
    # A server started for a command stops after this long without a request (0: never).
    idle_timeout_seconds: float = Field(1800.0, ge=0)
    # How long a command waits for the server it started before it reports the log.
    start_timeout_seconds: float = Field(180.0, gt=0)
    # Request bodies above this are refused with 413 (body_too_large) before they are read.
    max_body_bytes: int = Field(32 << 20, gt=0)
    # "uvicorn": the app in this process; "ray-serve": the same app as a Ray Serve application (a cluster).
    backend: Literal["uvicorn", "ray-serve"] = "uvicorn"
    # "ray": the actors on Ray (the default); "inprocess": everything in the server's process, no Ray
    # (synchronous: each write returns once memory is created; for tests and small embedded uses).
    runtime: Literal["ray", "inprocess"] = "ray"


class ProxySettings(ConfigModel):
    """The OpenAI-compatible memory proxy (`POST /v1/chat/completions`)."""

    # A workflow in <home>/workflows/<name>.json; when that file does not exist, the shipped
    # openai-proxy.workflow.json (readers, the response, a WorkflowLock, the memory creators).
    workflow: str = "openai-proxy"
    # The agent of a request whose `model` names none (`engram/<agent>`) and whose key has several agents.
    default_agent: str = "default"


class ServiceConfig(ConfigModel):
    home: Path = Path("~/.engram")
    shards: int = Field(1, ge=1, le=1024)
    llm: LlmConfig = LlmConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    ray: RaySettings = RaySettings()
    limits: Limits = Limits()
    server: ServerSettings = ServerSettings()
    proxy: ProxySettings = ProxySettings()


def default_home() -> Path:
    return Path(os.environ.get("ENGRAM_HOME") or "~/.engram").expanduser()


def load_service_config(home: str | Path | None = None) -> ServiceConfig:
    """The configuration of the engram home `home` (default: $ENGRAM_HOME or ~/.engram)."""
    home_path = Path(home).expanduser() if home is not None else default_home()
    path = home_path / SERVICE_FILE_NAME
    cfg = load(ServiceConfig, path) if path.exists() else ServiceConfig()
    updates: dict = {"home": home_path.resolve()}
    if os.environ.get("RAY_ADDRESS"):
        updates["ray"] = cfg.ray.model_copy(update={"address": os.environ["RAY_ADDRESS"]})
    return cfg.model_copy(update=updates)

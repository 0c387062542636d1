"""The service configuration: where engram keeps its data, how it runs, and its limits.

Read from `<home>/engram.json` when present; `ENGRAM_HOME` and `RAY_ADDRESS` override.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from engram.config import defaults as d
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
    # Policy groups that share one process per shard, e.g. [["observer", "context"]] (each group keeps its own hosts
    # and loop threads there); None: engram.policies.registry.PROCESSES; []: every group in processes of its own.
    processes: list[list[str]] | None = None
    # An append or read not answered within this fails with a clear error (e.g. the node of its shard is down
    # and the shard actor waits to restart there) instead of blocking its caller forever.
    call_timeout_seconds: float = Field(120.0, gt=0)
    # Agents whose cognitive memory each policy process keeps; the least recently used past this are evicted and
    # rebuilt from the log when next needed (None: engram.policies.cognitive_base.DEFAULT_RESIDENT_AGENTS).
    resident_agents: int | None = Field(None, ge=1)
    # Agents whose cognitive memory each shard's traces projection keeps; the least recently used past this are let
    # go once checkpointed, and read back from their rows and index files when their events come again
    # (None: engram.projections.traces.DEFAULT_RESIDENT_AGENTS).
    shard_resident_agents: int | None = Field(None, ge=1)

    @field_validator("pools")
    @classmethod
    def _known_groups(cls, pools: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(pools) - set(d.POLICY_GROUPS))
        if unknown:
            raise ValueError(f"unknown policy group(s) {', '.join(unknown)}; the groups are {', '.join(d.POLICY_GROUPS)}")
        return pools

    @field_validator("processes")
    @classmethod
    def _groups_once(cls, processes: list[list[str]] | None) -> list[list[str]] | None:
        if processes is None:
            return None
        named = [g for names in processes for g in names]
        unknown = sorted(set(named) - set(d.POLICY_GROUPS))
        if unknown:
            raise ValueError(f"unknown policy group(s) {', '.join(unknown)}; the groups are {', '.join(d.POLICY_GROUPS)}")
        twice = sorted({g for g in named if named.count(g) > 1})
        if twice:
            raise ValueError(f"a policy group is hosted by one process: {', '.join(twice)} listed more than once")
        return processes


class Limits(ConfigModel):
    max_message_chars: int = Field(100_000, gt=0)
    max_payload_bytes: int = Field(1 << 20, gt=0)
    max_batch_events: int = Field(20_000, gt=0)
    # Flow control (engram.kernel.flow): appends in flight per shard; how long an append past that waits for a slot
    # before it is refused (429 backpressure, Retry-After); and how far a shard's projections may fall behind its
    # log before it refuses appends (0: no limit).
    max_inflight_appends: int = Field(256, gt=0)
    backpressure_wait_seconds: float = Field(5.0, ge=0)
    max_projection_lag_events: int = Field(200_000, ge=0)
    # How far after the server's clock a time given with a request (a message's `ts`, a tool failure's, a mood's…)
    # may lie; later times are refused (engram.api.clock.to_us states the rule). A day covers clocks that disagree
    # and local times sent as UTC; the past is not bounded (imported history keeps its dates).
    max_future_seconds: float = Field(86_400.0, ge=0)
    # A read given a write's position (`after`, read-your-writes) waits at most this long for the projections and
    # policies it reads from to handle it, then answers 503 `lagging` naming what lags (engram.api.positions).
    read_after_wait_seconds: float = Field(10.0, gt=0, le=600)


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
    # With "ray-serve": how many replicas of the app answer requests (each over the same shard actors).
    replicas: int = Field(1, ge=1, le=64)
    # "ray": the actors on Ray (the default); "inprocess": everything in the server's process, no Ray
    # (synchronous: each write returns once memory is created; for tests and small embedded uses).
    runtime: Literal["ray", "inprocess"] = "ray"
    # Host names (besides the loopback names and `host`) this server answers to: the name remote clients use for a
    # server bound to 0.0.0.0, or a reverse proxy's. A request naming any other Host is refused (DNS rebinding).
    allowed_hosts: list[Annotated[str, Field(min_length=1, max_length=253, pattern=r"^[A-Za-z0-9.\-]+$")]] = []
    # Where jobs that write files (replay --out, export) may write besides <home>/exports: an absolute directory.
    export_root: str | None = None

    @field_validator("export_root")
    @classmethod
    def _absolute_export_root(cls, value: str | None) -> str | None:
        if value is not None and not os.path.isabs(os.path.expanduser(value)):
            raise ValueError(f"exportRoot {value!r} must be an absolute directory (jobs write under it)")
        return None if value is None else os.path.normpath(os.path.expanduser(value))


# The custom Ray resource a node offers for each shard it holds (`ray start --resources '{"engram-shard-000": 1}'`).
SHARD_RESOURCE = "engram-shard-{shard:03d}"
# What each actor of a shard asks of it: a sliver, so the shard actor and its policy actors all fit on that node.
SHARD_RESOURCE_SHARE = 0.001


class ClusterSettings(ConfigModel):
    """Where the shards live on a Ray cluster: node name -> the shards whose files that node holds.

    Empty (the default): no pinning; one machine. Otherwise each shard's actor, and the policy actors of its
    agents, are pinned to the node offering the custom resource `engram-shard-NNN`, so a restarted actor comes
    back beside its files; every shard must be on exactly one node (checked before start).
    """

    nodes: dict[str, list[Annotated[int, Field(ge=0, le=1023)]]] = {}

    @field_validator("nodes")
    @classmethod
    def _each_shard_once(cls, nodes: dict[str, list[int]]) -> dict[str, list[int]]:
        from engram.kernel.ids import validate_id

        seen: dict[int, str] = {}
        for name, shards in nodes.items():
            validate_id(name, "node name")
            for s in shards:
                if s in seen:
                    raise ValueError(f"shard {s} is placed on two nodes ({seen[s]!r} and {name!r})")
                seen[s] = name
        return nodes

    @property
    def pinned(self) -> bool:
        return bool(self.nodes)

    def node_of(self, shard: int) -> str | None:
        return next((name for name, shards in self.nodes.items() if shard in shards), None)

    def check(self, shard_count: int) -> None:
        """Every shard of the home on exactly one node, and no node naming a shard the home does not have."""
        if not self.pinned:
            return
        placed = {s for shards in self.nodes.values() for s in shards}
        missing = sorted(set(range(shard_count)) - placed)
        extra = sorted(placed - set(range(shard_count)))
        if missing:
            raise ValueError(f"cluster.nodes places no node for shard(s) {', '.join(map(str, missing))} "
                             f"(the home has {shard_count})")
        if extra:
            raise ValueError(f"cluster.nodes names shard(s) {', '.join(map(str, extra))} the home does not have "
                             f"({shard_count} shard(s))")

    @staticmethod
    def resource(shard: int) -> str:
        return SHARD_RESOURCE.format(shard=shard)


class ProxySettings(ConfigModel):
    """The OpenAI-compatible memory proxy (`POST /v1/chat/completions`)."""

    # A workflow in <home>/workflows/<name>.json; when that file does not exist, the shipped
    # openai-proxy.workflow.json (readers, the response, a WorkflowLock, the memory creators).
    workflow: str = "openai-proxy"
    # The agent of a request whose `model` names none (`engram/<agent>`) and whose key has several agents.
    default_agent: str = "default"


WebhookEvent = Literal["memory.created", "memory.updated", "memory.forgotten"]
WEBHOOK_EVENTS: tuple[WebhookEvent, ...] = ("memory.created", "memory.updated", "memory.forgotten")


class WebhookSettings(ConfigModel):
    """An outgoing webhook (`webhooks` in engram.json): the home's owner names where memory changes are POSTed.

    Only this file configures one: no API route or key can add or change a webhook, so no key can point the server at
    an address of its choosing."""

    url: str = Field(pattern=r"^https?://[^\s/?#]+[^\s]*$", max_length=2048)
    # The HMAC-SHA256 key of the `X-Engram-Signature` header; or the name of an environment variable holding it.
    secret: str | None = Field(None, min_length=16)
    secret_env: str | None = Field(None, min_length=1)
    events: list[WebhookEvent] = list(WEBHOOK_EVENTS)
    agents: list[Annotated[str, Field(min_length=1, max_length=128)]] | None = None  # None: every agent
    max_attempts: int = Field(6, ge=1, le=20)  # a delivery is retried with doubling backoff, then dropped (logged)
    backoff_seconds: float = Field(0.5, gt=0, le=60)
    timeout_seconds: float = Field(10.0, gt=0, le=120)
    queue: int = Field(10_000, ge=1)  # deliveries waiting per webhook; past it the oldest is dropped (logged)

    @model_validator(mode="after")
    def _has_a_secret(self) -> "WebhookSettings":
        if not self.secret and not self.secret_env:
            raise ValueError("a webhook needs `secret` (16 characters or more) or `secretEnv`: receivers check the "
                             "X-Engram-Signature header with it")
        return self

    def key(self) -> bytes:
        secret = os.environ.get(self.secret_env, "") if self.secret_env else (self.secret or "")
        if not secret:
            raise ValueError(f"webhook {self.url}: no secret (set `secret`, or `secretEnv` to a variable that holds one)")
        return secret.encode()


class ServiceConfig(ConfigModel):
    home: Path = Path("~/.engram")
    shards: int = Field(1, ge=1, le=1024)
    llm: LlmConfig = LlmConfig()
    embedder: EmbedderConfig = EmbedderConfig()
    ray: RaySettings = RaySettings()
    limits: Limits = Limits()
    server: ServerSettings = ServerSettings()
    # Checked against the home's shard count (its layout, which re-sharding grows) when a runtime opens it.
    cluster: ClusterSettings = ClusterSettings()
    proxy: ProxySettings = ProxySettings()
    webhooks: list[WebhookSettings] = []

    @model_validator(mode="after")
    def _embedder_endpoint(self) -> "ServiceConfig":
        # The embedder's endpoint is declared once, under llm.endpoints; the embedder carries a copy of it.
        object.__setattr__(self, "embedder", self.embedder.resolved(self.llm.endpoints))
        return self


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

"""Connecting engram to Ray: the embedded default or a cluster, and finding the shard actors.

- No address: engram starts a local Ray instance itself (the embedded default) and owns
  its actors; `close()` shuts them down cleanly (projections checkpointed, DuckDB closed).
- `RAY_ADDRESS` / `--address`, or a home served by `engram serve` (its `instance.json`):
  engram joins that cluster, and shard actors are detached, named per home, and shared
  by every client, so that each DuckDB file still has exactly one writer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import ray

from engram.actors.shard import SHARD_ACTOR_CONCURRENCY, ShardActor
from engram.config.service import ServiceConfig
from engram.home import Home

INSTANCE_FILE = "instance.json"


def instance_info(home: Home) -> dict | None:
    """What a live `engram serve` of this home recorded (address, pid, auth mode), if one runs."""
    path = home.root / INSTANCE_FILE
    if not path.exists():
        return None
    try:
        info = json.loads(path.read_text())
        os.kill(int(info["pid"]), 0)
    except (OSError, ValueError, KeyError):
        return None
    return info


def running_instance(home: Home) -> str | None:
    """The Ray address of a live `engram serve` for this home, if any."""
    info = instance_info(home)
    return info.get("address") if info else None


def _refresh_ray_config() -> None:
    """Make this process's Ray config see RAY_AUTH_MODE set after `import ray` (read at import)."""
    from ray._raylet import Config

    Config.initialize("")


class Runtime:
    def __init__(self, config: ServiceConfig, *, address: str | None = None):
        self.config = config
        self.home = Home(config.home, config.shards)
        self.home.layout_check()
        self.address = address or config.ray.address or running_instance(self.home)
        self.started_ray = False
        self._shards: dict[int, ray.actor.ActorHandle] = {}
        self._policies: dict[tuple[str, int, int], ray.actor.ActorHandle] = {}
        self._embedder: ray.actor.ActorHandle | None = None
        self.home_id = hashlib.blake2b(str(self.home.root).encode(), digest_size=4).hexdigest()

    @property
    def owns_actors(self) -> bool:
        """True unless we joined a cluster or a served instance: then actors are shared and detached."""
        return not self.address

    def start(self) -> "Runtime":
        if not ray.is_initialized():
            kwargs = dict(namespace=self.config.ray.namespace, log_to_driver=False, logging_level=logging.WARNING)
            if self.address:
                info = instance_info(self.home)
                if info and info.get("address") == self.address and info.get("auth_mode"):
                    # The served instance's Ray uses token auth; the token is in ~/.ray/auth_token.
                    os.environ.setdefault("RAY_AUTH_MODE", info["auth_mode"])
                    _refresh_ray_config()
                ray.init(address=self.address, **kwargs)
            else:
                # Ray's default for a new local instance, made explicit: token authentication on
                # (the token lives in ~/.ray/auth_token), and no warning about it on every command.
                if "RAY_AUTH_MODE" not in os.environ:
                    os.environ["RAY_AUTH_MODE"] = "token"
                    _refresh_ray_config()
                ray.init(num_cpus=self.config.ray.num_cpus, include_dashboard=False, **kwargs)
                self.started_ray = True
        return self

    def actor_name(self, role: str) -> str:
        return f"engram-{self.home_id}-{role}"

    def embedder(self) -> ray.actor.ActorHandle:
        """The home's EmbedderActor: the "embedder" service of its policies and projections (started
        before them, so that this process owns it; its model loads when the policies start)."""
        if self._embedder is None:
            from engram.actors.embedder import EmbedderActor
            from engram.embeddings.factory import index_time

            options = dict(name=self.embedder_name(), get_if_exists=True)
            if not self.owns_actors:
                options["lifetime"] = "detached"
            self._embedder = EmbedderActor.options(**options).remote(
                str(self.home.root), index_time(self.config.embedder).model_dump(mode="json")
            )
        return self._embedder

    def embedder_name(self) -> str:
        from engram.actors.embedder import EMBEDDER_ROLE

        return self.actor_name(EMBEDDER_ROLE)

    def shard(self, index: int) -> ray.actor.ActorHandle:
        handle = self._shards.get(index)
        if handle is None:
            self.embedder()  # projections may embed: the embedder exists before the shard
            limits = self.config.limits
            options = dict(
                name=self.actor_name(f"shard-{index:03d}"),
                get_if_exists=True,
                max_concurrency=SHARD_ACTOR_CONCURRENCY,
            )
            if not self.owns_actors:
                options["lifetime"] = "detached"
            handle = ShardActor.options(**options).remote(
                str(self.home.log_path(index)),
                str(self.home.projections_dir),
                index,
                limits.max_batch_events,
                limits.max_payload_bytes,
                self.config.model_dump(mode="json"),
                self.embedder_name(),
            )
            self._shards[index] = handle
        return handle

    def shards(self) -> list[ray.actor.ActorHandle]:
        return [self.shard(i) for i in range(self.config.shards)]

    def policies(self) -> dict[tuple[str, int, int], ray.actor.ActorHandle]:
        """The policy actors, (group, shard, member) -> handle; started on first use."""
        from engram.actors.policy import PolicyActor
        from engram.policies.registry import GROUPS, members as pool_size

        if GROUPS and not self._policies:
            self.embedder().warm.remote()  # the policies embed: load the model while they start
        for group, (_, specs) in GROUPS.items():
            members = pool_size(group, self.config.ray.pools)
            for shard in range(self.config.shards):
                self.shard(shard)
                for member in range(members):
                    key = (group, shard, member)
                    if key in self._policies:
                        continue
                    options = dict(name=self.actor_name(f"{group}-{shard:03d}-{member:03d}"), get_if_exists=True)
                    if not self.owns_actors:
                        options["lifetime"] = "detached"
                    self._policies[key] = PolicyActor.options(**options).remote(
                        self.config.model_dump(mode="json"),
                        self.actor_name(f"shard-{shard:03d}"),
                        shard,
                        specs,
                        member,
                        members,
                        self.embedder_name(),
                    )
        return dict(self._policies)

    def close(self) -> None:
        """Close owned actors cleanly (projections checkpointed, DuckDB closed); stop Ray if we started it."""
        if self.owns_actors:
            # Policies first (they append to the shards), then the shards, then the embedder they used.
            for group in (self._policies, self._shards):
                if group:
                    ray.get([h.close.remote() for h in group.values()])
                    for h in group.values():
                        ray.kill(h)
            if self._embedder is not None:
                try:
                    ray.get(self._embedder.close.remote())  # its cache file
                except ray.exceptions.RayActorError:
                    pass  # already gone: nothing left open
                ray.kill(self._embedder)
        self._policies.clear()
        self._shards.clear()
        self._embedder = None
        if self.started_ray or (self.address and ray.is_initialized()):
            ray.shutdown()
            self.started_ray = False

    def __enter__(self) -> "Runtime":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def write_instance_file(home: Home, address: str) -> Path:
    path = home.root / INSTANCE_FILE
    info = {"address": address, "pid": os.getpid(), "auth_mode": os.environ.get("RAY_AUTH_MODE")}
    path.write_text(json.dumps(info) + "\n")
    return path

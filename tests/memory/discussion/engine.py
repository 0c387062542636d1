"""Discussion memory in one process: the in-process runtime hosting only the Summarizer (one pool member),
driven synchronously, as the workflow engine's tests and benchmarks of the pure path need it."""

from __future__ import annotations

from pathlib import Path

from engram.api.discussion_memory import RuntimeMemory
from engram.config.home import ProjectionPaths


class LocalEngine:
    """`runtime`: the InProcessRuntime (groups ["summarizer"], one member, no automatic settling); the
    shortcuts name its one shard host, policy host and Summarizer."""

    def __init__(self, root: str | Path, config=None):
        from engram.config.service import load_service_config
        from engram.runtime.inprocess import InProcessRuntime

        config = config or load_service_config(root)
        config = config.model_copy(update={"ray": config.ray.model_copy(update={"pools": {"summarizer": 1}})})
        self.runtime = InProcessRuntime(config, groups=["summarizer"], wall_clock=False, snapshots=False,
                                        auto_settle=False).start()
        self.runtime.start_policies()
        self.config, self.home, self.services = config, self.runtime.home, self.runtime.services
        self.shard = self.runtime.shard_host(0)
        self.policies = self.runtime.policy_hosts[("summarizer", 0, 0)]
        self.summarizer = self.policies.policies[0]
        self.paths = ProjectionPaths(self.home.projections_dir)

    def append(self, writes):
        return self.runtime.append(writes)

    def sync_settings(self, agent: str, ts_us: int | None = None) -> int:
        import time

        return self.runtime.sync_settings(agent, ts_us or int(time.time() * 1_000_000))

    def settle(self) -> None:
        self.runtime.settle()

    def close(self) -> None:
        self.runtime.close()

    def __enter__(self) -> "LocalEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalMemory(RuntimeMemory):
    """The memory nodes' access over the engine's runtime."""

    def __init__(self, engine: LocalEngine, agent: str):
        super().__init__(engine.runtime, agent)

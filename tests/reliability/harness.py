"""One engram home in this process, without Ray: the shard's log and projections and every policy group of
`engram.policies.registry`, each hosted by a `PolicyHost` as a `PolicyActor` hosts it, pumped until quiet.

The plain classes the actors wrap, driven synchronously: what the reliability tests (forgetting, generated
operation sequences, crashes) and `bench/soak.py` run many times over."""

from __future__ import annotations

import time
from pathlib import Path

from engram.config.home import Home
from engram.config.service import ServiceConfig, load_service_config
from engram.events.envelope import Write
from engram.kernel.ids import agent_stream
from engram.memory.ingest.messages import IncomingMessage, discussion_write
from engram.memory.settings import SettingsView, sync_writes
from engram.policies.base import PolicyContext
from engram.policies.host import PolicyHost
from engram.policies.registry import GROUPS, policy_classes
from engram.providers.services import build_services
from engram.shard.host import ShardHost

READER_GROUP, READER = "traces", "trace-reader"


class LocalHome:
    def __init__(self, root: str | Path, config: ServiceConfig | None = None, *, groups: list[str] | None = None,
                 services: dict | None = None):
        self.config = config or load_service_config(root)
        self.home = Home(self.config.home, 1)
        self.home.layout_check()
        self.services = services if services is not None else build_services(self.config)
        self.shard = ShardHost(self.home.log_path(0), self.home.projections_dir, services=self.services, background=False)
        self.hosts: dict[str, PolicyHost] = {}
        for group in groups if groups is not None else list(GROUPS):
            ctx = PolicyContext(shard=0, home=self.home, services=self.services, read=self.shard.read,
                                append=self.shard.append_many)
            policies = [cls(ctx) for cls in policy_classes(GROUPS[group][1])]
            self.hosts[group] = PolicyHost(policies, read=self.shard.read, append=self.shard.append_many,
                                           head=self.shard.head, state_dir=self.home.root / "state")
        self._synced: set[str] = set()

    # ------------------------------------------------------------------ writing

    def sync_settings(self, agent: str, ts_us: int) -> None:
        if agent in self._synced:
            return
        view = SettingsView()
        for rec in self.shard.read(0, limit=None, stream=agent_stream(agent), types=["SettingsChanged"]):
            view.apply(rec)
        writes = sync_writes(self.home, agent, view.recorded_hashes(agent), ts_us, self.config.llm)
        if writes:
            self.shard.append_many(writes)
        self._synced.add(agent)

    def say(self, agent: str, discussion: str, messages: list[IncomingMessage]):
        self.sync_settings(agent, min(m.ts_us for m in messages))
        write = discussion_write(agent, discussion, messages, max_message_chars=self.config.limits.max_message_chars)
        return self.shard.append_many([write])[0] if write is not None else None

    def append(self, writes: list[Write]):
        return self.shard.append_many(writes)

    # ------------------------------------------------------------------ running

    def settle(self, max_rounds: int = 200) -> None:
        """Pump every policy host and the projections until the log stops growing."""
        for _ in range(max_rounds):
            before = self.shard.head()
            for host in self.hosts.values():
                host.run_until_caught_up()
            if self.shard.head() == before:
                break
        self.shard.catch_up()

    def recall(self, agent: str, query: str, *, discussion: str | None = None, now_us: int | None = None):
        """What `CognitiveMemory.recall` does through the reader actor: answer, then append the TraceRetrieved."""
        host = self.hosts[READER_GROUP]
        host.run_until_caught_up()
        reader = next(p for p in host.policies if p.name == READER)
        result = reader.recall(agent, query, discussion=discussion, now_us=now_us or int(time.time() * 1e6))
        writes = reader.take_writes()
        if writes:
            self.shard.append_many(writes)
        return result

    def forget(self, agent: str, discussion: str | None = None, *, reason: str = "") -> dict:
        from engram.shard.forget import forget

        return forget(self.shard, list(self.hosts.values()), agent, discussion, reason=reason)

    def close(self) -> None:
        for host in self.hosts.values():
            host.save()
        self.shard.close()
        embedder = self.services.get("embedder")
        if hasattr(embedder, "close"):
            embedder.close()

    def __enter__(self) -> "LocalHome":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

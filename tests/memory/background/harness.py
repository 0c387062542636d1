"""The background processes over a real shard (DuckDB log and projections) in this process, no Ray:
the policies are hosted by a `PolicyHost` exactly as a `PolicyActor` hosts them, pumped until the log
is quiet. LLM calls are counted by wrapping the memory tasks."""

from __future__ import annotations

from pathlib import Path

from engram.config.agent import AgentConfig
from engram.config.home import Home
from engram.config.recorded import SCOPE_AGENT
from engram.config.service import ServiceConfig
from engram.events.envelope import NewEvent, Recorded, Write
from engram.kernel.ids import agent_stream
from engram.memory.ingest.messages import IncomingMessage, discussion_write
from engram.memory.settings import settings_event
from engram.policies.base import PolicyContext
from engram.policies.clock import ClockTicker
from engram.policies.consolidator import Consolidator
from engram.policies.host import PolicyHost
from engram.policies.observer import Observer
from engram.policies.reflector import Reflector
from engram.providers.llm.factory import make_tasks
from engram.shard.host import ShardHost

BACKGROUND = (Observer, Reflector, ClockTicker, Consolidator)  # as in policies.registry.GROUPS


class CountingTasks:
    """The configured memory tasks, counting every call by task name."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: dict[str, int] = {}
        self.provider = getattr(inner, "provider", "offline")

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("_") or name in ("describe",):
            return attr

        def counted(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            return attr(*args, **kwargs)

        return counted


def services(embedder=None) -> dict:
    config = ServiceConfig()
    out = {"config": config, "tasks": CountingTasks(make_tasks(config.llm))}
    if embedder is not None:
        out["embedder"] = embedder
    return out


class Pipeline:
    def __init__(self, root: Path, svc: dict, policies=BACKGROUND, state_dir: Path | None = None):
        self.root = Path(root)
        self.services = svc
        self.shard = ShardHost(self.root / "log" / "shard-000.duckdb", self.root / "projections", services=svc,
                               background=False)
        ctx = PolicyContext(shard=0, home=Home(self.root), services=svc, read=self.shard.read,
                            append=self.shard.append_many)
        self.policies = [cls(ctx) for cls in policies]
        self.host = PolicyHost(self.policies, read=self.shard.read, append=self.shard.append_many,
                               head=self.shard.head, state_dir=state_dir)

    def configure(self, agent: str, config: dict | AgentConfig, ts_us: int) -> None:
        cfg = config if isinstance(config, AgentConfig) else AgentConfig.model_validate(config)
        ev = settings_event(SCOPE_AGENT, "agent.config.json", cfg)
        self.shard.append_many([Write(agent_stream(agent), agent, (NewEvent(ev, ts_us, event_id=f"settings:{ev.content_hash}"),))])

    def say(self, agent: str, discussion: str, messages) -> None:
        incoming = [IncomingMessage(role=m.role, content=m.content, ts_us=m.ts_us, name=m.name, message_id=m.message_id)
                    for m in messages]
        write = discussion_write(agent, discussion, incoming, max_message_chars=100_000)
        if write is not None:
            self.shard.append_many([write])

    def settle(self, rounds: int = 100) -> None:
        for _ in range(rounds):
            before = self.shard.head()
            self.host.run_until_caught_up()
            if self.shard.head() == before and self.host.position >= before:
                break
        self.shard.catch_up()

    def events(self, *types: str, agent: str | None = None) -> list[Recorded]:
        return self.shard.read(0, limit=None, types=list(types) or None, agent=agent)

    def sql(self, query: str, params=None):
        return self.shard.query(query, params)

    def close(self) -> None:
        self.shard.close()

"""Builders for the infinite-context tests: counted memory tasks, a one-shard engram without Ray, conversations."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from engram.config.agent import AgentConfig
from engram.events.envelope import Write
from engram.kernel.tokens import estimate_tokens
from engram.memory.context.chain import DiscussionContext
from engram.memory.ingest.messages import IncomingMessage, discussion_write
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.types import ChatLine

T0 = 1_772_440_200 * 1_000_000  # 2026-03-02T09:10:00Z
MINUTE_US = 60 * 1_000_000

TOPICS = [
    "Priya Raman is building a Next.js app called Acme Dashboard with Supabase auth for the client Dana Whitfield.",
    "Marco Bianchi handles the Postgres schema while Priya does the frontend in TypeScript.",
    "The deadline moved from March 9 to March 12 and dark mode is now in scope for the release.",
    "They discussed row level security policies, the service role key, and the staging environment in Lisbon.",
    "Priya prefers Tailwind over CSS-in-JS and wants CSV export after the first release.",
    "The team agreed to run the load test on Thursday and to review the billing page with Dana on Friday.",
]


class CountingTasks(OfflineTasks):
    """The offline provider, counting every memory-task call by task name."""

    def __init__(self):
        super().__init__()
        self.calls: Counter = Counter()

    def run(self, task_input):
        self.calls[task_input.task] += 1
        return super().run(task_input)

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def config(**infinite_context) -> AgentConfig:
    return AgentConfig.model_validate({"memory": {"infiniteContext": infinite_context}})


def conversation(n: int) -> list[IncomingMessage]:
    """`n` alternating user/assistant messages (about 60 tokens each), a minute apart."""
    out = []
    for i in range(n):
        text = f"{TOPICS[i % len(TOPICS)]} {TOPICS[(i * 7 + 3) % len(TOPICS)]} Item {i + 1} was settled today."
        role = "user" if i % 2 == 0 else "assistant"
        out.append(IncomingMessage(role=role, content=text, ts_us=T0 + i * MINUTE_US,
                                   name="Priya" if role == "user" else None, message_id=f"m{i + 1}"))
    return out


def lines_of(messages: list[IncomingMessage], first_seq: int = 1) -> dict[int, ChatLine]:
    return {
        first_seq + i: ChatLine(role=m.role, content=m.content, seq=first_seq + i, ts_us=m.ts_us,
                                message_id=m.message_id or "", name=m.name)
        for i, m in enumerate(messages)
    }


def run_pure(messages, cfg: AgentConfig, tasks=None, *, notes=None):
    """Messages through the pure core as the policy drives it: returns the context and every event, in order.

    Without `notes` this is `engram.memory.context.simulate`; with it, each compaction sees those recorded notes."""
    from engram.memory.context import rules
    from engram.memory.context.compactor import Compactor
    from engram.memory.context.simulate import simulate

    tasks = tasks or CountingTasks()
    lines = lines_of(messages)
    if notes is None:
        sim = simulate(list(lines.values()), cfg, tasks, agent="a", discussion="d", clock=lambda: 0.0)
        return sim.context, sim.events
    ctx = DiscussionContext("a", "d")
    events = []
    compactor = Compactor(tasks, clock=lambda: 0.0)
    for seq, line in lines.items():
        ctx.add_message(seq, estimate_tokens(line.content))
        span = rules.due(ctx, cfg.memory.infinite_context)
        if span:
            out = compactor.compact(ctx, span, [lines[t.seq] for t in span], cfg, ts_us=line.ts_us, recorded=notes(span))
            for ev in out.events:
                ctx.apply(ev, line.ts_us)
                events.append((seq, ev))
    return ctx, events


class LocalContext:
    """One shard's log and projections plus the ContextCompactor, in this process (no Ray)."""

    def __init__(self, root: Path, tasks=None, agent_config: dict | None = None, agent: str = "a"):
        from engram.config.service import load_service_config
        from engram.config.home import Home
        from engram.policies.base import PolicyContext
        from engram.policies.context_compactor import ContextCompactor
        from engram.policies.host import PolicyHost
        from engram.shard.host import ShardHost

        self.root, self.agent = Path(root), agent
        self.tasks = tasks or CountingTasks()
        self.config = load_service_config(root)
        self.home = Home(self.config.home, 1)
        self.home.layout_check()
        self.services = {"config": self.config, "tasks": self.tasks}
        self.shard = ShardHost(self.home.log_path(0), self.home.projections_dir, services=self.services, background=False)
        self.ctx = PolicyContext(shard=0, home=self.home, services=self.services, read=self.shard.read,
                                 append=self.shard.append_many)
        self.policy = ContextCompactor(self.ctx)
        self.policy.clock = lambda: 0.0
        self.host = PolicyHost([self.policy], read=self.shard.read, append=self.shard.append_many,
                               head=self.shard.head, state_dir=None)
        if agent_config is not None:
            self.set_config(agent_config, T0 - MINUTE_US)

    def set_config(self, data: dict, ts_us: int) -> None:
        from engram.memory.settings import SettingsView, sync_writes
        from engram.kernel.ids import agent_stream

        path = self.home.agent_config_path(self.agent)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
        view = SettingsView()
        for rec in self.shard.read(0, limit=None, stream=agent_stream(self.agent), types=["SettingsChanged"]):
            view.apply(rec)
        writes = sync_writes(self.home, self.agent, view.recorded_hashes(self.agent), ts_us)
        if writes:
            self.shard.append_many(writes)

    def append(self, messages, discussion: str = "d", *, one_by_one: bool = False) -> None:
        batches = [[m] for m in messages] if one_by_one else [messages]
        for batch in batches:
            w = discussion_write(self.agent, discussion, batch, max_message_chars=100_000)
            self.shard.append_many([w])
            if one_by_one:
                self.settle()
        self.settle()

    def write(self, writes: list[Write]) -> None:
        self.shard.append_many(writes)
        self.settle()

    def settle(self) -> None:
        self.host.run_until_caught_up()
        self.shard.catch_up()

    def sql(self, query: str, params=None):
        return self.shard.query(query, params)

    def events(self, kind: str = "ContextCompacted", stream: str | None = "d"):
        return self.shard.read(0, limit=None, stream=stream, types=[kind])

    def close(self) -> None:
        self.shard.close()

"""Memory per agent is bounded: a policy process keeps the cognitive memory of its most recently used agents, and
an agent evicted while idle is rebuilt from the log when it speaks again, deciding as if it had never left."""

from __future__ import annotations

import msgspec

from engram.config.home import Home
from engram.config.service import ServiceConfig
from engram.events.envelope import NewEvent, Write
from engram.events.messages import MessageAppended
from engram.policies.auto_ingest import AutoIngest
from engram.policies.base import PolicyContext
from engram.policies.host import PolicyHost
from engram.policies.trace_reader import TraceReader
from engram.shard.host import ShardHost

T0 = 1_767_225_600_000_000
SAID = {
    "ann": ["I'm building a Next.js app called Acme Dashboard with Supabase auth, due on March 9.",
            "My sister Ana moved to Lisbon in 2021 and she works as a marine biologist there."],
    "bob": ["I run a bakery in Porto called Pão Quente and we open at six every morning.",
            "My daughter Rita starts university in Coimbra this September, studying physics."],
    "cid": ["I'm training for the Berlin marathon in September with a coach named Jonas.",
            "My favourite climbing gym is Boulderwelt in Munich, I go there every Tuesday."],
}


def turn(agent: str, n: int, content: str) -> Write:
    return Write(stream=f"{agent}-chat", agent=agent, events=(NewEvent(
        event=MessageAppended(role="user", content=content, message_id=f"{agent}-{n}", token_estimate=len(content) // 4,
                              name=agent.capitalize()),
        ts_us=T0 + n * 60_000_000, event_id=f"{agent}-{n}"),))


def run(tmp_path, services, resident: int | None):
    config = ServiceConfig()
    config = config.model_copy(update={"ray": config.ray.model_copy(update={"resident_agents": resident})})
    svc = {**services, "config": config}
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    ctx = PolicyContext(shard=0, home=home, services=svc, read=shard.read, append=shard.append_many)
    policies = [AutoIngest(ctx), TraceReader(ctx)]
    host = PolicyHost(policies, read=shard.read, append=shard.append_many, head=shard.head,
                      state_dir=home.root / "state")
    evicted: set[str] = set()
    # Ann speaks, then Bob and Cid for a while (Ann idle), then Ann again, restating what she said first.
    script = [("ann", 0), ("ann", 1), ("bob", 0), ("cid", 0), ("bob", 1), ("cid", 1), ("bob", 0), ("cid", 0),
              ("ann", 0), ("ann", 1)]
    for n, (agent, k) in enumerate(script):
        shard.append_many([turn(agent, n, SAID[agent][k])])
        host.run_until_caught_up()
        for p in host.policies:
            evicted |= p.evicted
    decided = [(r.stream, r.event_id, msgspec.structs.replace(r.event, llm=None) if hasattr(r.event, "llm") else r.event)
               for r in shard.read(0, limit=None) if r.type != "MessageAppended"]
    memories = {}
    for p in host.policies:
        for agent in SAID:
            mem = p.memory(agent)
            memories[(p.name, agent)] = (
                {tid: (t.content, t.active, t.category) for tid, t in mem.book.traces.items()},
                list(mem.index.ids), mem.index.vectors(list(mem.index.ids)).round(5).tolist(),
            )
    shard.close()
    return decided, memories, evicted


def test_an_agent_evicted_while_idle_decides_and_remembers_as_if_it_had_never_left(tmp_path):
    from engram.providers.embeddings import make_embedder
    from engram.providers.llm.factory import make_tasks

    config = ServiceConfig()
    services = {"tasks": make_tasks(config.llm), "embedder": make_embedder(config.embedder)}
    kept = run(tmp_path / "kept", services, None)
    bounded = run(tmp_path / "bounded", services, 1)
    assert "ann" in bounded[2] and not kept[2]  # Ann's memory left both policies while she was idle...
    assert bounded[0] == kept[0]  # ...and every decision is the same, the restatements included
    assert bounded[1] == kept[1]  # so is every memory, rebuilt from the log
    assert any(e[1].startswith("restated:") or type(e[2]).__name__ == "FactsIngested" for e in kept[0])

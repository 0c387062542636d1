"""Which shard holds an agent: a recorded agent→shard map over rendezvous hashing.

A shard never splits an agent. Where an agent lives is decided once and then kept:

- An agent the layout has not recorded goes to the shard of highest rendezvous weight
  (`weight(agent, shard)`, a stable hash): every process, machine and Python version agrees.
- Re-sharding (`grow`) records every existing agent's shard first, then moves only the agents it
  must: each new shard is split off one existing shard (its parent, `new % old_count`), and an agent
  of that parent moves to the child when the child wins the rendezvous within the parent's family.
  About `(M - N) / M` of the agents move, all from a parent to one of its children: a child's log is
  a subset of one parent's log, so the moved events keep their positions (seqs), and with them every
  id, memory id and causation that names a position.

Homes created before the map use `hash % shard_count` ("modulo"); their layout is upgraded in place
(the routing kept) and switches to rendezvous at their first re-sharding, when every agent is recorded.

Pure: no I/O; `engram.config.home` reads and writes the layout file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

MODULO = "modulo"
RENDEZVOUS = "rendezvous"
LAYOUT_VERSION = 2


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def shard_of(agent: str, shard_count: int) -> int:
    """The shard of `agent` in a home with no recorded map (the original routing, "modulo")."""
    if shard_count < 1:
        raise ValueError("shard_count must be at least 1")
    return _hash(agent) % shard_count


def weight(agent: str, shard: int) -> int:
    """The rendezvous weight of `agent` on `shard`: the shard of highest weight wins."""
    return _hash(f"{shard}\x1f{agent}")


def rendezvous(agent: str, candidates: Iterable[int]) -> int:
    return max(candidates, key=lambda s: (weight(agent, s), -s))


class ReshardError(ValueError):
    """A re-sharding that cannot be done (the message says why)."""


@dataclass(frozen=True)
class ShardMap:
    """The routing part of a home's layout: shard count, hashing, and the recorded agents."""

    shards: int
    hashing: str = RENDEZVOUS
    agents: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.shards < 1:
            raise ValueError("shard count must be at least 1")
        if self.hashing not in (MODULO, RENDEZVOUS):
            raise ValueError(f"unknown hashing {self.hashing!r}")
        bad = {a: s for a, s in self.agents.items() if not 0 <= s < self.shards}
        if bad:
            raise ValueError(f"agents recorded on shards that do not exist: {bad}")

    def shard_of(self, agent: str) -> int:
        recorded = self.agents.get(agent)
        if recorded is not None:
            return recorded
        if self.hashing == MODULO:
            return shard_of(agent, self.shards)
        return rendezvous(agent, range(self.shards))

    def plan(self, new_count: int, agents: Iterable[str]) -> dict[str, tuple[int, int]]:
        """The agents that move when growing to `new_count` shards: agent -> (from, to)."""
        if new_count <= self.shards:
            raise ReshardError(f"the home has {self.shards} shard(s); re-sharding only adds shards "
                               f"(asked for {new_count})")
        moves = {}
        for agent in sorted(set(agents)):
            parent = self.shard_of(agent)
            family = [parent] + [c for c in range(self.shards, new_count) if c % self.shards == parent]
            target = rendezvous(agent, family)
            if target != parent:
                moves[agent] = (parent, target)
        return moves

    def grown(self, new_count: int, agents: Iterable[str]) -> "ShardMap":
        """The map after growing to `new_count`: every existing agent recorded where it now lives."""
        agents = sorted(set(agents))
        moves = self.plan(new_count, agents)
        placed = {a: moves[a][1] if a in moves else self.shard_of(a) for a in agents}
        return ShardMap(new_count, RENDEZVOUS, placed)

    def to_json(self) -> dict[str, Any]:
        return {"version": LAYOUT_VERSION, "shards": self.shards, "hashing": self.hashing,
                "agents": dict(sorted(self.agents.items()))}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ShardMap":
        """A layout file's routing; a file without `version` is a home made before the map (modulo)."""
        if "version" not in data:
            return cls(int(data["shards"]), MODULO, {})
        return cls(int(data["shards"]), data.get("hashing", RENDEZVOUS), dict(data.get("agents", {})))

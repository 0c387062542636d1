"""The policies engram runs, grouped into Ray actors.

Each group is hosted by `members` actors per shard; with several members, a policy hosts
the logical actors (e.g. one Summarizer per discussion) that consistent hashing places on
its member (`engram.kernel.placement.owner`). Add a policy by adding it to a group here.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engram.config import defaults as d

if TYPE_CHECKING:
    from engram.policies.base import Policy

# group name -> (default members per shard, ["module:Class", ...]); `ray.pools` in engram.json overrides the size
GROUPS: dict[str, tuple[int, list[str]]] = {
    # One Summarizer per discussion (a logical actor), hosted by a pool of two actors per shard.
    # On a 2-core machine every actor is a process that costs start-up time and memory: one member for
    # the rest by default; a cluster sizes the pools in `ray.pools`.
    "summarizer": (2, ["engram.policies.summarizer:Summarizer"]),
    "auto-ingest": (
        1,
        [
            "engram.policies.auto_ingest:AutoIngest",
            "engram.policies.tool_failures:ToolFailureLearner",
            "engram.policies.mood:MoodTracker",
        ],
    ),
    "working-memory": (1, ["engram.policies.working_memory:WorkingMemoryPolicy"]),
    "traces": (1, ["engram.policies.trace_reader:TraceReader"]),
    # One context compactor per discussion (infinite context); compactions are rare, one member suffices.
    "context": (1, ["engram.policies.context_compactor:ContextCompactor"]),
    # Background processes: the Observer on its own (its increments must not wait behind a reflection),
    # and per shard the Reflector, the clock ticker and the Consolidator, in that order (the traces of a
    # batch are in the log before the ticks they cross, and a tick is consolidated after them).
    "observer": (1, ["engram.policies.observer:Observer"]),
    "consolidation": (
        1,
        [
            "engram.policies.reflector:Reflector",
            "engram.policies.clock:ClockTicker",
            "engram.policies.consolidator:Consolidator",
        ],
    ),
}

assert tuple(GROUPS) == d.POLICY_GROUPS, "engram.config.defaults.POLICY_GROUPS names the groups of GROUPS, in order"


# Groups that share one process per shard (`ray.processes` in engram.json overrides; [] puts every group in processes
# of its own). Each group still has its own hosts, loop threads and positions in that process, so a slow policy (an LLM
# call) holds up only its own group; what the groups share is the process: a Ray worker costs ~150 MB of memory and a
# few milliseconds of CPU a second whatever it does (Ray's core worker wakes its main thread every 10 ms), which eight
# mostly idle policy processes paid eight times. The groups of the turn's path (auto-ingest, which encodes every
# message, and the trace reader, which answers recalls) keep their own processes: under load they use a core each.
PROCESSES: tuple[tuple[str, ...], ...] = (("summarizer", "working-memory", "context", "observer", "consolidation"),)


def members(group: str, pools: dict[str, int]) -> int:
    """Actors per shard hosting `group`: the configured pool size, else the group's default."""
    return pools.get(group, GROUPS[group][0])


def processes(pools: dict[str, int], shared: Sequence[Sequence[str]] | None = None) -> list[list[tuple[str, int]]]:
    """The policy processes of one shard, each the (group, member)s it hosts, in GROUPS order: the groups of a list
    of `shared` (default PROCESSES) in one process with all their members; any other group in a process per member."""
    lists = [[g for g in GROUPS if g in names] for names in (PROCESSES if shared is None else shared)]
    first = {names[0]: names for names in lists if names}
    placed = {g for names in lists for g in names}
    out: list[list[tuple[str, int]]] = []
    for group in GROUPS:
        if group in first:
            out.append([(g, m) for g in first[group] for m in range(members(g, pools))])
        elif group not in placed:
            out += [[(group, m)] for m in range(members(group, pools))]
    return out


def process_role(slots: Sequence[tuple[str, int]], shard: int) -> str:
    """The name of the process hosting `slots` for `shard`: `<group>-<shard>-<member>` for a process of one group
    member (as policy actors were always named), the groups joined by "+" for a shared one."""
    if len(slots) == 1:
        group, member = slots[0]
        return f"{group}-{shard:03d}-{member:03d}"
    return "+".join(dict.fromkeys(g for g, _ in slots)) + f"-{shard:03d}"


def policy_classes(specs: list[str]) -> list[type[Policy]]:
    out = []
    for spec in specs:
        module, _, name = spec.partition(":")
        out.append(getattr(importlib.import_module(module), name))
    return out

"""The policies engram runs, grouped into Ray actors.

Each group is hosted by `members` actors per shard; with several members, a policy hosts
the logical actors (e.g. one Summarizer per discussion) that consistent hashing places on
its member (`engram.kernel.placement.owner`). Add a policy by adding it to a group here.
"""

from __future__ import annotations

import importlib
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


def members(group: str, pools: dict[str, int]) -> int:
    """Actors per shard hosting `group`: the configured pool size, else the group's default."""
    return pools.get(group, GROUPS[group][0])


def policy_classes(specs: list[str]) -> list[type[Policy]]:
    out = []
    for spec in specs:
        module, _, name = spec.partition(":")
        out.append(getattr(importlib.import_module(module), name))
    return out

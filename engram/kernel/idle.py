"""Waiting until memory has caught up: one loop for the runtimes (in-process) and the clients (over HTTP).

Policies append events (summaries, observations…) as they work, so the log may grow while waiting: idle
means two consecutive looks with the same heads and every projection and policy at its shard's head.
"""

from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

POLL_S = 0.1
# The name a shard's projection fold goes by among its consumers (beside the policy groups), where a read waits for
# a position (read-your-writes: engram.api.positions, Runtime.reach).
PROJECTIONS = "projections"


def furthest_behind(head: int, positions: Mapping[str, int]) -> tuple[int, tuple[str, ...]]:
    """(the position every consumer of a shard has reached, the consumers at it when it is short of `head`).
    `positions`: each projection's and policy's position (a policy member's as "name#member")."""
    if not positions:
        return head, ()
    low = min(positions.values())
    return low, (tuple(sorted(name for name, p in positions.items() if p == low)) if low < head else ())


def wait_idle(look: Callable[[], tuple[Sequence[int], Sequence[Mapping[str, int]]]], timeout: float,
              on_progress: Callable[[int, int, tuple[str, ...]], None] | None = None, poll_s: float = POLL_S) -> bool:
    """`look()` -> (heads, each consumer's position) per shard. True once idle; False after `timeout` seconds.
    `on_progress(done, total, behind)`: events every consumer has handled, events in the log, and the consumers
    furthest behind (those that hold `done` back; empty when every consumer is at its head)."""
    deadline = time.monotonic() + timeout
    previous = None
    while time.monotonic() < deadline:
        heads, positions = look()
        heads = list(heads)
        reached = [furthest_behind(h, p) for h, p in zip(heads, positions)]
        done = [low for low, _ in reached]
        if on_progress:
            behind = tuple(dict.fromkeys(name for _, names in reached for name in names))
            on_progress(sum(min(p, h) for p, h in zip(done, heads)), sum(heads), behind)
        if all(p >= h for p, h in zip(done, heads)):
            if heads == previous:
                return True
            previous = heads
            continue
        previous = None
        time.sleep(poll_s)
    return False

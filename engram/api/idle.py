"""Waiting until memory has caught up: one loop for the runtimes (in-process) and the clients (over HTTP).

Policies append events (summaries, observations…) as they work, so the log may grow while waiting: idle
means two consecutive looks with the same heads and every projection and policy at its shard's head.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

POLL_S = 0.1


def wait_idle(look: Callable[[], tuple[Sequence[int], Sequence[int]]], timeout: float,
              on_progress: Callable[[int, int], None] | None = None, poll_s: float = POLL_S) -> bool:
    """`look()` -> (heads, consumed positions) per shard. True once idle; False after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    previous = None
    while time.monotonic() < deadline:
        heads, done = look()
        heads = list(heads)
        if on_progress:
            on_progress(sum(min(p, h) for p, h in zip(done, heads)), sum(heads))
        if all(p >= h for p, h in zip(done, heads)):
            if heads == previous:
                return True
            previous = heads
            continue
        previous = None
        time.sleep(poll_s)
    return False

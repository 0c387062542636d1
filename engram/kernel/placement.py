"""Placing logical actors (one per discussion or agent) on a pool of Ray actors.

A Ray actor is a process; thousands of discussions cannot each own one. A logical actor's
state and serial mailbox live on the pool member that consistent hashing assigns it, so
work for one discussion never runs twice at once and a pool resize moves few of them.
"""

from __future__ import annotations

import bisect
import hashlib
from functools import lru_cache

VIRTUAL_NODES = 64


def _point(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


@lru_cache(maxsize=64)
def _ring(members: int) -> tuple[list[int], list[int]]:
    points = sorted((_point(f"member-{m}#{v}"), m) for m in range(members) for v in range(VIRTUAL_NODES))
    return [p for p, _ in points], [m for _, m in points]


def owner(key: str, members: int) -> int:
    """The pool member hosting the logical actor `key` (stable across processes)."""
    if members <= 1:
        return 0
    points, owners = _ring(members)
    i = bisect.bisect(points, _point(key)) % len(points)
    return owners[i]

"""Agents map to shards by a stable hash; a shard never splits an agent."""

from __future__ import annotations

import hashlib


def shard_of(agent: str, shard_count: int) -> int:
    """The shard of `agent`: stable across processes, machines and Python versions."""
    if shard_count < 1:
        raise ValueError("shard_count must be at least 1")
    digest = hashlib.blake2b(agent.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shard_count

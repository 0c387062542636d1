"""Forgetting across every process that holds a shard's data.

A forget touches three kinds of holder:

- the shard (`ShardHost`): the log (payloads erased, file rewritten), the projections (rebuilt from the
  erased log) and, through its embedder service, the embedding cache (cut down to what the rebuilt
  projections use);
- the policy hosts of the shard (`PolicyHost`, in Ray a `PolicyActor` each): their in-memory state and
  their snapshots under `state/`;
- nothing else keeps message text (the server's logs never contain any).

`forget` runs them in an order that leaves nothing behind whatever point a crash interrupts it at:
policies paused; the marker appended (the durable record: a start completes whatever was not done);
the policies' snapshots deleted (a restart rebuilds them from the erased log); the policies drain up to
the marker (their own forget handling, in memory); the shard erases and rebuilds; every policy whose state
still holds a forgotten text is reset and rebuilt from the erased log; snapshots written; policies resumed.
"""

from __future__ import annotations

import threading
from typing import Protocol, Sequence

from engram.embeddings.cache import text_key


class ShardForgetting(Protocol):
    def begin_forget(self, agent: str, discussion: str | None = None, *, reason: str = "") -> tuple[int, list[str]]: ...

    def complete_forget(self, marker_seq: int, streams: list[str]) -> tuple[dict, list[str]]: ...


class PolicyForgetting(Protocol):
    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def discard_snapshots(self) -> None: ...

    def drain(self) -> int: ...

    def scrub(self, texts: list[str]) -> list[str]: ...


def forget(shard: ShardForgetting, hosts: Sequence[PolicyForgetting], agent: str, discussion: str | None = None,
           *, reason: str = "") -> dict:
    """Forget a discussion (or a whole agent) everywhere; returns the report (`policies_rebuilt`: policies whose
    state still held forgotten text after their own forget handling, and were rebuilt from the log)."""
    for host in hosts:
        host.pause()
    try:
        marker_seq, streams = shard.begin_forget(agent, discussion, reason=reason)
        for host in hosts:
            host.discard_snapshots()
        for host in hosts:
            host.drain()
        report, texts = shard.complete_forget(marker_seq, streams)
        report["policies_rebuilt"] = sorted({name for host in hosts for name in host.scrub(texts)})
    finally:
        for host in hosts:
            host.resume()
    report["forgotten"] = discussion or agent
    report["streams"] = streams
    return report


def search_terms(texts: Sequence[str], min_chars: int = 12) -> list[bytes]:
    """What to look for in other state: the forgotten texts, and their long words (a code, an address, a
    name with digits), which a derived piece of state (an entity, a key phrase) can hold on its own."""
    terms = set(texts)
    for text in texts:
        for word in text.split():
            word = word.strip(".,;:!?()[]{}\"'«»“”")
            if len(word) >= min_chars:
                terms.add(word)
    return sorted(t.encode("utf-8") for t in terms)


class RecordingEmbedder:
    """An embedder that notes the keys of the texts it is asked for, so that the cache can keep only those."""

    def __init__(self, inner):
        self.inner = inner
        self.keys: set[str] = set()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def is_fallback(self) -> bool:
        return self.inner.is_fallback

    def embed(self, texts):
        with self._lock:
            self.keys.update(text_key(t) for t in texts)
        return self.inner.embed(texts)

    def retain(self) -> int:
        """Cut the cache down to the recorded texts (for the inner embedder's model); entries removed."""
        retain = getattr(self.inner, "retain", None)
        return retain(self.inner.name, set(self.keys)) if retain is not None else 0

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

import json
import threading
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from engram.events.control import AgentForgotten, DiscussionForgotten, FORGET_MARKERS
from engram.events.erasure import (
    memory_events, memory_key, parse_memory_key, plan as plan_erasure, plan_memory, unfinished as unfinished_erasures,
)
from engram.events.memory_edits import MemoryDeleted
from engram.events.store import EventStore
from engram.kernel.files import atomic_write, compact_database
from engram.kernel.gate import alone, shared
from engram.kernel.ids import agent_stream
from engram.providers.embeddings.base import Embedder, WrappingEmbedder
from engram.providers.embeddings.cache import text_key
from engram.shard.base import ShardBase


class ShardForgetting(Protocol):
    def begin_delete_memory(self, agent: str, kind: str, memory_id: str, *,
                            reason: str = "") -> tuple[int, list[str]]: ...

    def begin_forget(self, agent: str, discussion: str | None = None, *, reason: str = "") -> tuple[int, list[str]]: ...

    def complete_forget(self, marker_seq: int, streams: list[str]) -> tuple[dict[str, Any], list[str]]: ...


class PolicyForgetting(Protocol):
    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def discard_snapshots(self) -> None: ...

    def drain(self) -> int: ...

    def scrub(self, texts: list[str]) -> list[str]: ...


def forget(shard: ShardForgetting, hosts: Sequence[PolicyForgetting], agent: str, discussion: str | None = None,
           *, reason: str = "", memory: tuple[str, str] | None = None) -> dict[str, Any]:
    """Forget a discussion (or a whole agent, or one memory: `memory` = (kind, id)) everywhere; returns the report
    (`policies_rebuilt`: policies whose state still held forgotten text after their own forget handling, and were
    rebuilt from the log)."""
    for host in hosts:
        host.pause()
    try:
        if memory is not None:
            marker_seq, streams = shard.begin_delete_memory(agent, memory[0], memory[1], reason=reason)
        else:
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
    report["forgotten"] = memory_key(*memory) if memory is not None else discussion or agent
    report["streams"] = streams
    return report


class RecordingEmbedder(WrappingEmbedder):
    """An embedder that notes the keys of the texts it is asked for, so that the cache can keep only those."""

    def __init__(self, inner: Embedder):
        self.embedder = inner
        self.keys: set[str] = set()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            self.keys.update(text_key(t) for t in texts)
        return self.embedder.embed(texts)

    def retain(self) -> int:
        """Cut the cache down to the recorded texts (for the inner embedder's model); entries removed."""
        retain: Callable[[str, set[str]], int] | None = getattr(self.embedder, "retain", None)  # a caching embedder's
        return retain(self.embedder.name, set(self.keys)) if retain is not None else 0


def forget_journal(log_path: Path) -> Path:
    """Written while a forget erases (ids only): its presence at start means it did not finish."""
    return log_path.with_name(log_path.stem + ".forgetting.json")


def unfinished_forgets(store: EventStore, journal: Path) -> list[dict[str, Any]]:
    """Forgets whose erasure did not finish: markers with content left before them, or a journal left behind."""
    pending = [{"marker_seq": seq, "streams": streams} for seq, streams in unfinished_erasures(store)]
    if journal.exists() and not pending:
        try:
            pending = [json.loads(journal.read_text())]
        except (OSError, ValueError):
            pending = [{"marker_seq": store.head(), "streams": []}]
    return pending


def unfinished_forgets_in(log_path: Path) -> list[dict[str, Any]]:
    """`unfinished_forgets` of a shard whose files no process holds (`engram status` without a server)."""
    store = EventStore(log_path, read_only=True)
    try:
        return unfinished_forgets(store, forget_journal(log_path))
    finally:
        store.close()


class ShardForget(ShardBase):
    """Forgetting in this shard: the marker, the erasure, the journal that makes it resumable (a part of `ShardHost`)."""

    @shared
    def begin_forget(self, agent: str, discussion: str | None = None, *, reason: str = "") -> tuple[int, list[str]]:
        """Record that a discussion (or a whole agent) is forgotten: the marker, durable before anything is
        erased, so that a forget interrupted at any point is completed at the next start. Returns
        (marker seq, the streams it forgets)."""
        owned = {s for (a, s) in self.store.streams() if a == agent}
        marker: DiscussionForgotten | AgentForgotten
        if discussion is not None:
            if discussion not in owned:
                raise KeyError(f"agent {agent!r} has no discussion {discussion!r}")
            marker, streams = DiscussionForgotten(discussion_id=discussion, reason=reason), [discussion]
        else:
            if not owned:
                raise KeyError(f"no agent {agent!r} in this shard's log")
            marker, streams = AgentForgotten(agent_id=agent, reason=reason), sorted(owned)
        self._journal.parent.mkdir(parents=True, exist_ok=True)
        appended = self.store.append(agent_stream(agent), [marker], agent=agent)
        return appended.seqs[-1], streams

    @shared
    def begin_delete_memory(self, agent: str, kind: str, memory_id: str, *, reason: str = "") -> tuple[int, list[str]]:
        """Record that one memory is deleted: a `MemoryDeleted` marker in the memory's stream, durable before
        anything is erased (as `begin_forget`). Returns (marker seq, [its pseudo-stream `memory:<kind>:<id>`])."""
        seqs = memory_events(self.store, agent, kind, memory_id)
        if not seqs:
            raise KeyError(f"agent {agent!r} has no {kind} memory {memory_id!r}")
        stream = self.store.query("SELECT stream FROM events WHERE seq = ?", [seqs[0]])[1][0][0]
        self._journal.parent.mkdir(parents=True, exist_ok=True)
        appended = self.store.append(stream, [MemoryDeleted(kind=kind, memory_id=memory_id, reason=reason)], agent=agent)
        return appended.seqs[-1], [memory_key(kind, memory_id)]

    @alone
    def complete_forget(self, marker_seq: int, streams: list[str]) -> tuple[dict[str, Any], list[str]]:
        """Erase what `begin_forget` recorded: the payloads in the log (and the log file rewritten, WAL
        included), every projection rebuilt from the erased log, and the embedding cache cut down to what
        the rebuilt projections use. Returns the report and the forgotten texts (in memory only: for
        checking other state, e.g. policy snapshots)."""
        atomic_write(self._journal, json.dumps({"marker_seq": marker_seq, "streams": streams}).encode())
        self.wait_projections(marker_seq)
        memory = parse_memory_key(streams[0]) if len(streams) == 1 else None
        agent = self.store.query("SELECT agent FROM events WHERE seq = ?", [marker_seq])[1][0][0]
        if memory is not None:
            erasure = plan_memory(self.store, agent, *memory, before_seq=marker_seq)
        else:  # the marker's agent's streams of those names: another agent's `my-trip` is another discussion
            erasure = plan_erasure(self.store, streams, before_seq=marker_seq, agent=agent)
        erased = self.store.erase(erasure.seqs, keep_ids=memory is not None)
        self._recount()
        self._close_projections()
        self.store.close()
        compact_database(self.log_path)
        self.store = self._open_store()
        self._open_projections()
        self.rebuild(retain_cache=True)
        self._journal.unlink(missing_ok=True)
        report = {"forgotten": streams, "events_erased": erased, "marker_seq": marker_seq}
        return report, erasure.texts

    @alone
    def forget(self, agent: str, discussion: str | None = None, *, reason: str = "") -> dict[str, Any]:
        """Forget a discussion (or a whole agent) in this shard: record it, erase its content and what derives
        from it from the log file, and rebuild the projections so nothing of it is left in them either.
        (Policies hold state too: `engram.shard.forget.forget` coordinates them with this.)"""
        marker_seq, streams = self.begin_forget(agent, discussion, reason=reason)
        report, _ = self.complete_forget(marker_seq, streams)
        report["forgotten"] = discussion or agent
        report["streams"] = streams
        return report

    @property
    def _journal(self) -> Path:
        return forget_journal(self.log_path)

    @shared
    def unfinished_forgets(self) -> list[dict[str, Any]]:
        """Forgets recorded but not (completely) erased: what `status` shows, and what a start completes."""
        counts = self.events_by_type()
        if not any(marker in counts for marker in FORGET_MARKERS) and not self._journal.exists():
            return []  # no forget was ever recorded (the counts are kept as the log grows): no query of the log
        return unfinished_forgets(self.store, self._journal)

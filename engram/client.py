"""The Python API of engram: append to the log and read it back, through the shard actors.

    with Engram.open() as mem:                      # embedded: starts local Ray
        mem.append_messages("default", "trip-planning", [IncomingMessage(...)])
        mem.sql("SELECT role, content FROM messages")
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Sequence

import ray

from engram.actors.runtime import Runtime
from engram.config.service import ServiceConfig, load_service_config
from engram.events.envelope import Appended, Write
from engram.events.shards import shard_of
from engram.ids import validate_agent
from engram.ingest.messages import IncomingMessage, discussion_write
from engram.sql import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, QueryResult


class Engram:
    def __init__(self, config: ServiceConfig, runtime: Runtime):
        self.config = config
        self.runtime = runtime
        self._synced: set[str] = set()  # agents whose settings files were checked this session

    @classmethod
    def open(cls, home: str | Path | None = None, *, address: str | None = None) -> "Engram":
        config = load_service_config(home)
        return cls(config, Runtime(config, address=address).start())

    # ------------------------------------------------------------------ writing

    def shard_of(self, agent: str) -> int:
        return shard_of(validate_agent(agent), self.config.shards)

    def append(self, writes: Sequence[Write]) -> list[Appended]:
        """Append writes; those of one shard commit together, all or nothing."""
        by_shard: dict[int, list[int]] = defaultdict(list)
        for i, w in enumerate(writes):
            by_shard[self.shard_of(w.agent)].append(i)
        refs = {s: self.runtime.shard(s).append_many.remote([writes[i] for i in idx]) for s, idx in by_shard.items()}
        results: list[Appended | None] = [None] * len(writes)
        for s, ref in refs.items():
            for i, res in zip(by_shard[s], ray.get(ref)):
                results[i] = res
        return results  # type: ignore[return-value]

    def append_messages(self, agent: str, discussion: str, messages: list[IncomingMessage]) -> Appended | None:
        self.sync_settings(agent)
        write = discussion_write(agent, discussion, messages, max_message_chars=self.config.limits.max_message_chars)
        return self.append([write])[0] if write else None

    def sync_settings(self, agent: str, ts_us: int | None = None, *, fresh: bool = False) -> int:
        """Record the agent's settings files in the log if they changed since last recorded.

        Event time of the record: `ts_us` (e.g. the first message it governs), else now. Files are read once
        per session, unless `fresh` (e.g. a regeneration that must use the settings on disk now).
        Returns the number of SettingsChanged events appended.
        """
        from engram.settings import SettingsView, agent_stream, sync_writes

        if agent in self._synced and not fresh:
            return 0
        view = SettingsView()
        for rec in self.read(agent, stream=agent_stream(agent), types=["SettingsChanged"], limit=None):
            view.apply(rec)
        writes = sync_writes(self.runtime.home, agent, view.recorded_hashes(agent), ts_us or now_us(), self.config.llm)
        self._synced.add(agent)
        return sum(len(r.seqs) - r.duplicates for r in self.append(writes)) if writes else 0

    def require_agent(self, agent: str) -> None:
        """Raise UnknownAgent unless `agent` exists in this home (events in the log, or a configuration file)."""
        from engram.settings import require_known_agent

        streams = ray.get(self.runtime.shard(self.shard_of(agent)).streams.remote())
        require_known_agent(self.runtime.home, agent, {a for _, a in streams.values()})

    # ------------------------------------------------------------------ reading

    def read(self, agent: str, after: int = 0, **filters):
        return ray.get(self.runtime.shard(self.shard_of(agent)).read.remote(after, agent=agent, **filters))

    def heads(self) -> dict[int, int]:
        shards = self.runtime.shards()
        return dict(enumerate(ray.get([s.head.remote() for s in shards])))

    def wait_projections(self, timeout: float = 120.0) -> bool:
        """Wait until every shard's projections have folded everything appended so far."""
        shards = self.runtime.shards()
        heads = ray.get([s.head.remote() for s in shards])
        return all(ray.get([s.wait_projections.remote(h, timeout) for s, h in zip(shards, heads)]))

    def sql(self, query: str, params: list | None = None) -> tuple[list[str], list[tuple]]:
        """Run read-only SQL over the log and projections (no row limit), as (column names, rows)."""
        result = self.sql_result(query, params, max_rows=None)
        return result.columns, result.rows

    def sql_result(self, query: str, params: list | None = None, *, agents: list[str] | None = None,
                   timeout_s: float | None = DEFAULT_TIMEOUT_S, max_rows: int | None = DEFAULT_MAX_ROWS) -> QueryResult:
        """Read-only, confined SQL (`engram.sql`). With several shards, each shard runs the query on its own
        data and the rows are concatenated (aggregates are per shard then)."""
        shards = self.runtime.shards()
        results = ray.get([s.sql.remote(query, params, agents, timeout_s, max_rows) for s in shards])
        rows = [row for r in results for row in r.rows]
        truncated = any(r.truncated for r in results) or (max_rows is not None and len(rows) > max_rows)
        return QueryResult(columns=results[0].columns, rows=rows[:max_rows] if max_rows is not None else rows,
                           truncated=truncated)

    def status(self) -> list[dict]:
        """Per shard: head, projection positions, consumer (policy) positions, lag, event counts."""
        shards = ray.get([s.status.remote() for s in self.runtime.shards()])
        policies = self.runtime.policies()
        reports = ray.get([h.status.remote() for h in policies.values()])
        for (group, shard, member), rep in zip(policies, reports):
            shards[shard].setdefault("consumers", {}).update(rep["positions"])
            if rep["errors"]:
                shards[shard].setdefault("consumer_errors", {}).update(rep["errors"])
            if rep.get("rebuilt"):  # snapshots that were not restored: these policies rebuild from the log
                shards[shard].setdefault("consumers_rebuilt", {}).update(rep["rebuilt"])
        return shards

    def wait_idle(self, timeout: float = 600.0, on_progress=None) -> bool:
        """Wait until every projection and policy has handled the whole log, and nothing new came.

        Policies append events (summaries, observations…), so the log may grow while waiting;
        idle means two consecutive looks with the same heads and every consumer at its head.
        """
        deadline = time.monotonic() + timeout
        previous = None
        while time.monotonic() < deadline:
            status = self.status()
            heads = [st["head"] for st in status]
            positions = [
                min(list(st["projections"].values()) + list(st.get("consumers", {}).values()), default=st["head"])
                for st in status
            ]
            if on_progress:
                on_progress(sum(min(p, h) for p, h in zip(positions, heads)), sum(heads))
            if all(p >= h for p, h in zip(positions, heads)):
                if heads == previous:
                    return True
                previous = heads
                continue
            previous = None
            time.sleep(0.1)
        return False

    def forget(self, agent: str, discussion: str | None = None, *, reason: str = "") -> dict:
        """Forget a discussion (or a whole agent) everywhere: log, projections, embedding cache, policy state
        and snapshots (`engram.forgetting`). Raises KeyError for a discussion the agent does not have."""
        from engram.forgetting import forget

        shard_index = self.shard_of(agent)
        shard = _Remote(self.runtime.shard(shard_index))
        hosts = [_Remote(h) for (_, s, _), h in sorted(self.runtime.policies().items()) if s == shard_index]
        return forget(shard, hosts, agent, discussion, reason=reason)

    def close(self) -> None:
        self.runtime.close()

    def __enter__(self) -> "Engram":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Remote:
    """An actor's methods called as plain ones (ray.get on each): what `engram.forgetting` drives."""

    def __init__(self, handle):
        self._handle = handle

    def __getattr__(self, name):
        method = getattr(self._handle, name)

        def call(*args, **kwargs):
            return ray.get(method.remote(*args, **kwargs))

        return call


def now_us() -> int:
    """Wall-clock time for messages that arrive without one (the shell's job, never a projection's)."""
    return int(time.time() * 1_000_000)

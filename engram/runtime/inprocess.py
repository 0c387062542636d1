"""The in-process runtime: a home's shards, projections and policies in this process, without Ray.

The same parts the Ray actors host (`ShardHost` per shard, a `PolicyHost` per policy group, shard and
pool member), driven synchronously: nothing runs in the background; `settle()` (and so `wait_idle`)
runs the policies and the projections until neither has anything left to do. For tests, benchmarks
of the pure path, and embedding engram in one process. The policy snapshots live where the Ray
runtime keeps them (`<home>/state/`), so a home can be opened by either.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from engram.config.service import ServiceConfig
from engram.events.envelope import Appended, Recorded, Write
from engram.kernel.placement import owner
from engram.policies.registry import GROUPS, members as pool_size
from engram.kernel.idle import PROJECTIONS
from engram.runtime.base import DISCUSSION_GROUPS, Lagging, Report, Row, Runtime, merge_results, seq_ranges
from engram.runtime.errors import query_error

if TYPE_CHECKING:
    import numpy as np

    from engram.config.llm import EmbedderConfig
    from engram.memory.cognitive.retrieval import RecallResult
    from engram.policies.host import PolicyHost
    from engram.providers.embeddings.cache import EmbeddingCache
    from engram.providers.embeddings.cached import CachedEmbedder
    from engram.shard.host import ShardHost
    from engram.sql import QueryResult

R = TypeVar("R")

SUMMARIZER_GROUP = "summarizer"
READER_GROUP = "traces"
READER_POLICY = "trace-reader"


def pump(host: PolicyHost) -> int:
    """Run a policy host until it has caught up, or until one of its policies fails (a failing policy, e.g. on an
    unreachable LLM, keeps its position and is retried at the next settle; it must not spin here)."""
    total = 0
    while True:
        n = host.pump()
        if n == 0 or host.errors:
            return total
        total += n


class InProcessRuntime(Runtime):
    def __init__(self, config: ServiceConfig, *, groups: Sequence[str] | None = None, wall_clock: bool = True,
                 snapshots: bool = True, auto_settle: bool = True) -> None:
        """`groups`: the policy groups to host (default: all of `engram.policies.registry.GROUPS`);
        `wall_clock`: give the policies the wall-clock time when they settle, as the policy actors do;
        `snapshots`: keep policy snapshots under `<home>/state/` (False: policies refold the log);
        `auto_settle`: every append returns after the policies and projections have handled it (memory
        is created synchronously); False: only `settle()` / `wait_idle()` run them."""
        from engram.providers.services import build_services

        self.config = config = self._open_home(config)
        unknown = sorted(set(groups or ()) - set(GROUPS))
        if unknown:
            raise ValueError(f"unknown policy group(s) {', '.join(unknown)}; the groups are {', '.join(GROUPS)}")
        self.groups = list(GROUPS) if groups is None else list(groups)
        self.wall_clock = wall_clock
        self.snapshots = snapshots
        self.auto_settle = auto_settle
        self.services = build_services(config)
        self.hosts: dict[int, ShardHost] = {}  # shard -> its host
        self.policy_hosts: dict[tuple[str, int, int], PolicyHost] = {}  # (group, shard, member) -> its host
        self._target: CachedEmbedder | None = None  # the configured embedder, while `reindex` prepares it
        self._policy_lock = threading.RLock()  # policies are single-threaded, like an actor's mailbox
        self._closed = False

    @property
    def description(self) -> str:
        return "in-process (no Ray)"

    def start(self) -> "InProcessRuntime":
        from engram.shard.host import ShardHost

        limits = self.config.limits
        for s in self.all_shards():
            if s not in self.hosts:
                self.hosts[s] = ShardHost(
                    self.home.log_path(s), self.home.projections_dir, shard=s, services=self.services,
                    max_batch_events=limits.max_batch_events, max_payload_bytes=limits.max_payload_bytes,
                    background=False,
                )
        return self

    def shard_host(self, shard: int) -> ShardHost:
        if shard not in self.hosts:
            self.start()
        return self.hosts[shard]

    def start_policies(self) -> None:
        from engram.policies.base import PolicyContext
        from engram.policies.host import PolicyHost
        from engram.policies.registry import policy_classes

        with self._policy_lock:
            for group in self.groups:
                specs = GROUPS[group][1]
                members = pool_size(group, self.config.ray.pools)
                for s in self.all_shards():
                    shard = self.shard_host(s)
                    for member in range(members):
                        if (group, s, member) in self.policy_hosts:
                            continue
                        ctx = PolicyContext(shard=s, home=self.home, services=self.services, member=member,
                                            members=members, read=shard.read, append=shard.append_many)
                        self.policy_hosts[(group, s, member)] = PolicyHost(
                            [cls(ctx) for cls in policy_classes(specs)], read=shard.read, append=shard.append_many,
                            head=shard.head, state_dir=self.home.root / "state" if self.snapshots else None,
                        )

    def _member(self, group: str, agent: str, key: str) -> PolicyHost:
        if group not in self.groups:
            raise LookupError(f"this runtime does not host the {group!r} policies (groups: {', '.join(self.groups)})")
        self.start_policies()
        return self.policy_hosts[(group, self.shard_of(agent), owner(key, pool_size(group, self.config.ray.pools)))]

    # ------------------------------------------------------------------ the log

    def append(self, writes: Sequence[Write]) -> list[Appended]:
        with self.routing_gate.shared():
            by_shard: dict[int, list[int]] = {}
            for i, w in enumerate(writes):
                by_shard.setdefault(self.shard_of(w.agent), []).append(i)
            results: list[Appended | None] = [None] * len(writes)
            for s, idx in by_shard.items():
                with self.window(s):
                    for i, res in zip(idx, self.shard_host(s).append_many([writes[i] for i in idx])):
                        results[i] = res
            if self.auto_settle:  # inside the gate: a change that holds appends (reindex) never meets these policies
                self.start_policies()
                self.settle()
        return results  # type: ignore[return-value]

    def read(self, agent: str, after: int = 0, **filters: Any) -> list[Recorded]:
        return self.shard_host(self.shard_of(agent)).read(after, agent=agent, **filters)

    def read_seqs(self, agent: str, seqs: Sequence[int]) -> list[Recorded]:
        host = self.shard_host(self.shard_of(agent))
        wanted = set(seqs)
        return [r for lo, hi in seq_ranges(seqs) for r in host.read(lo - 1, to_seq=hi, limit=None, agent=agent)
                if r.seq in wanted]

    def heads(self) -> dict[int, int]:
        return {s: self.shard_host(s).head() for s in self.all_shards()}

    def streams(self) -> set[tuple[str, str]]:
        return {key for s in self.all_shards() for key in self.shard_host(s).store.streams()}

    # ------------------------------------------------------------------ reading

    def sql(self, query: str, params: list[Any] | None = None) -> tuple[list[str], list[Row]]:
        results: list[tuple[list[str], list[Row]]] = []
        for s in self.all_shards():
            host = self.shard_host(s)
            host.catch_up()  # no projection thread here: SQL sees what the log holds now
            try:
                results.append(host.query(query, params))
            except Exception as exc:
                raise query_error(exc) from None
        return results[0][0], [row for _, rows in results for row in rows]

    def user_sql(self, query: str, params: list[Any] | None = None, *, agents: Sequence[str] | None = None,
                 timeout_s: float | None = None, max_rows: int | None = None) -> QueryResult:
        """One shard: confined there. Several: the statement runs once, confined, over every shard's relations
        (`engram.sql.gathered`), so aggregates, ORDER BY/LIMIT and joins across shards are exact."""
        for s in self.all_shards():
            self.shard_host(s).catch_up()
        if self.config.shards == 1:
            host = self.shard_host(0)
            return merge_results([host.sql(query, params, agents=agents, timeout_s=timeout_s, max_rows=max_rows)],
                                 max_rows)
        from engram.sql.gathered import GatheredShards, referenced
        from engram.config.home import ProjectionPaths
        from engram.sql import run_readonly

        names = referenced(query)
        wanted = None if names is None else sorted(names)
        parts = {s: self.shard_host(s).relations(wanted, agents) for s in self.all_shards()}
        source = GatheredShards(parts, ProjectionPaths(self.home.projections_dir))
        return run_readonly(query, source, params=params, agents=agents, timeout_s=timeout_s, max_rows=max_rows)

    def shard_status(self) -> list[Report]:
        out = []
        for s in self.all_shards():
            st = self.shard_host(s).status()
            st["node"] = f"{socket.gethostname()} (this process, pid {os.getpid()})"
            st["actors"] = {f"shard-{s:03d}": st["node"]}
            for (_, shard, _), host in self.policy_hosts.items():
                if shard == s:
                    st.setdefault("consumers", {}).update(host.positions())
                    if host.errors:
                        st.setdefault("consumer_errors", {}).update(host.errors)
                    if host.rebuilt:  # snapshots that were not restored: these policies rebuild from the log
                        st.setdefault("consumers_rebuilt", {}).update(host.rebuilt)
            out.append(st)
        return out

    def wait_projections(self, timeout: float = 120.0) -> bool:
        for s in self.all_shards():
            self.shard_host(s).catch_up()
        return True

    def settle(self) -> None:
        """Run the policies and the projections until neither has anything left to do."""
        with self._policy_lock:
            while True:
                handled = 0
                for host in self.policy_hosts.values():
                    handled += pump(host)
                    if self.wall_clock:
                        handled += host.wall_clock(int(time.time() * 1_000_000))
                for s in self.all_shards():
                    self.shard_host(s).catch_up()
                if handled == 0:
                    return

    def recall(self, agent: str, query: str, *, min_position: int | None, now_us: int,
               **options: Any) -> RecallResult:
        from engram.policies.trace_reader import TraceReader

        host = self._member(READER_GROUP, agent, agent)
        with self._policy_lock:
            wanted = self.shard_host(self.shard_of(agent)).head() if min_position is None else min_position
            if host.position < wanted:
                pump(host)
            reader = next(p for p in host.policies if p.name == READER_POLICY and isinstance(p, TraceReader))
            result: RecallResult = reader.recall(agent, query, now_us=now_us, **options)
            writes = reader.take_writes()
            if writes:
                host.append(writes)
        return result

    def reach(self, agent: str, seq: int, consumers: Sequence[str], *, discussion: str | None,
              timeout: float) -> Lagging | None:
        """Everything here runs when asked: the policies named handle the log now, then the projections fold it."""
        shard = self.shard_of(agent)
        target = min(seq, self.shard_host(shard).head())
        for name in consumers:
            if name == PROJECTIONS:
                shard_host = self.shard_host(shard)
                if not shard_host.wait_projections(target, timeout):
                    return Lagging(f"the projections of shard {shard}", shard, shard_host.projection_position())
                continue
            if name not in self.groups:  # not hosted here: nothing of it to wait for
                continue
            if name in DISCUSSION_GROUPS and not discussion:  # every discussion of the agent: every member
                self.start_policies()
                hosts = [h for (g, s, _), h in sorted(self.policy_hosts.items()) if g == name and s == shard]
            else:
                hosts = [self._member(name, agent, (discussion or "") if name in DISCUSSION_GROUPS else agent)]
            for host in hosts:
                with self._policy_lock:
                    if host.position < target:
                        pump(host)
                if host.position < target:
                    return Lagging(f"the {name} policies of shard {shard}", shard, host.position)
            target = max(target, self.shard_host(shard).head())
        return None

    def drain_summarizer(self, agent: str, discussion: str) -> str:
        host = self._member(SUMMARIZER_GROUP, agent, discussion)
        with self._policy_lock:
            pump(host)
        self.wait_projections()
        error = host.errors.get("summarizer")
        return f"the Summarizer failed and will retry: {error}" if error else ""

    # ------------------------------------------------------------------ whole-shard work

    def _each(self, shards: Sequence[int], call: Callable[[ShardHost], R],
              on_done: Callable[[R], None] | None) -> list[R]:
        results: list[R] = []
        for s in shards:
            results.append(call(self.shard_host(s)))
            if on_done:
                on_done(results[-1])
        return results

    def replay_into(self, shards: Sequence[int], out_dir: str, to_seq: int | None, until_us: int | None,
                    on_shard: Callable[[Report], None] | None = None) -> list[Report]:
        return self._each(shards, lambda h: h.replay_into(out_dir, to_seq=to_seq, until_us=until_us), on_shard)

    def rebuild(self, shards: Sequence[int], on_shard: Callable[[Report], None] | None = None) -> list[Report]:
        return self._each(shards, lambda h: h.rebuild(), on_shard)

    def verify_replay(self, shards: Sequence[int],
                      on_shard: Callable[[list[str]], None] | None = None) -> list[str]:
        return [d for diffs in self._each(shards, lambda h: h.verify_replay(), on_shard) for d in diffs]

    def shard_call(self, shard: int, method: str, *args: Any) -> Any:
        return getattr(self.shard_host(shard), method)(*args)

    # ------------------------------------------------------------------ the embedder (see Runtime.reindex)

    def _cache(self) -> EmbeddingCache:
        from engram.providers.embeddings.cache import EmbeddingCache
        from engram.providers.embeddings.factory import cache_path

        embedder = self.services.get("embedder")
        cache: EmbeddingCache | None = getattr(getattr(embedder, "embedder", embedder), "cache", None)
        return cache if cache is not None else EmbeddingCache(cache_path(self.home.root))

    def prepare_vectors(self, target: EmbedderConfig, texts: list[str],
                        on_progress: Callable[[int, int], None] | None = None) -> str:
        from engram.providers.embeddings.factory import reembed_into

        self._target = reembed_into(self._cache(), target, texts, on_progress)
        return self._target.name

    def target_vectors(self, target: EmbedderConfig, texts: list[str]) -> np.ndarray:
        if self._target is None:
            raise RuntimeError("prepare_vectors first: the target embedder is not open")
        return self._target.embed(texts)

    def open_generations(self, shards: Sequence[int]) -> None:
        target = self._target
        if target is None:  # else each generation would fail at its first embedding, naming no cause
            raise RuntimeError("prepare_vectors first: the target embedder is not open")
        for s in shards:
            self.shard_host(s).open_generation(target)

    def switch_embedder(self, target: EmbedderConfig) -> None:
        from engram.providers.services import build_services

        for host in self.hosts.values():
            host.close()
        self.hosts.clear()
        embedder = self.services.get("embedder")
        if embedder is not None and hasattr(embedder, "close"):
            embedder.close()  # the embedding cache file
        self._target = None
        self.config = self.config.model_copy(update={"embedder": target})
        self.services = build_services(self.config)
        self.start()

    def stop_policies(self) -> None:
        with self._policy_lock:
            for host in self.policy_hosts.values():
                host.save()
            self.policy_hosts.clear()

    def forget(self, agent: str, discussion: str | None, reason: str,
               memory: tuple[str, str] | None = None) -> Report:
        """`engram.shard.forget.forget` over the shard host and the shard's policy hosts (their state and snapshots
        lose the forgotten text too)."""
        from engram.shard.forget import forget

        index = self.shard_of(agent)
        try:
            with self._policy_lock:  # no policy reads the log while the shard rewrites it
                hosts = [h for (_, s, _), h in sorted(self.policy_hosts.items()) if s == index]
                return forget(self.shard_host(index), hosts, agent, discussion, reason=reason, memory=memory)
        except KeyError as exc:
            raise LookupError(str(exc).strip("\"'")) from None

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._policy_lock:
            for host in self.policy_hosts.values():
                host.save()
        for shard_host in self.hosts.values():
            shard_host.close()
        embedder = self.services.get("embedder")
        if embedder is not None and hasattr(embedder, "close"):
            embedder.close()  # the embedding cache file

    def __enter__(self) -> "InProcessRuntime":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

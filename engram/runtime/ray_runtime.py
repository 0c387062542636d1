"""The Ray runtime: a home's shard, policy and embedder actors, and every `ray.get` engram makes.

- No address: a local Ray instance started for this process (`engram serve`, or `Engram.open`),
  which owns the actors; `close()` shuts them down cleanly (projections checkpointed, DuckDB closed).
- An address (`RAY_ADDRESS`, `--address`, `ray.address`), or `shared=True` (the replicas of a Ray
  Serve application): actors are detached and named per home, so every process of the home shares
  them and each DuckDB file keeps exactly one writer.
- Ray already initialised in this process (a test session): its actors are used and owned by this
  runtime.

Logical actors (a Summarizer per discussion, a trace reader per agent) are placed on their pool
member by consistent hashing (`engram.kernel.placement.owner`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from contextlib import ExitStack
from typing import Callable, Sequence

import ray

from engram.actors.policy import POLICY_ACTOR_CONCURRENCY, MemberHandle, PolicyActor, slot_key
from engram.actors.shard import SHARD_ACTOR_CONCURRENCY, ShardActor
from engram.config.service import ServiceConfig
from engram.events.envelope import Appended, Recorded, Write
from engram.kernel.placement import owner
from engram.policies.registry import members as pool_size, process_role, processes as policy_processes
from engram.kernel.idle import PROJECTIONS
from engram.runtime.base import DISCUSSION_GROUPS, Lagging, Runtime, RuntimeUnavailable, merge_results, seq_ranges
from engram.runtime.errors import CALLER_ERRORS, query_error
from engram.runtime.startup import init_ray

# An idempotent call that meets a restarting actor is tried this many times in all, waiting 0.5 s, 1 s, 2 s...
IDEMPOTENT_ATTEMPTS = 4
RETRY_BASE_S = 0.5

SUMMARIZER_GROUP = "summarizer"
READER_GROUP = "traces"
READER_POLICY = "trace-reader"


def get(refs, timeout: float | None = None):
    """`ray.get`, with the caller's errors (a bad weight, an unknown discussion, SQL that fails) raised as
    themselves instead of wrapped in a RayTaskError, and a dead actor (or one that does not answer within
    `timeout`: its node is gone and it waits to restart) as RuntimeUnavailable."""
    try:
        return ray.get(refs, timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise RuntimeUnavailable(
            f"an engram actor did not answer within {timeout:.0f}s (its node may be down while it restarts); "
            "the call may still complete: retry it with the same event ids") from None
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if cause is not None:
            translated = query_error(cause)
            if translated is not cause or isinstance(cause, CALLER_ERRORS):
                raise translated from None
        raise
    except ray.exceptions.RayActorError as exc:
        raise RuntimeUnavailable(f"an engram actor is not available: {str(exc).strip().splitlines()[0]}") from None


class RayRuntime(Runtime):
    def __init__(self, config: ServiceConfig, *, address: str | None = None, shared: bool | None = None,
                 namespace: str | None = None):
        self.config = config = self._open_home(config)
        # The Ray namespace of the named actors (None: this process's): a driver reaching the actors a Serve
        # deployment's replicas made names theirs (`engram.boot.ray_serve.start_webhooks`).
        self.namespace = namespace
        self.address = address or config.ray.address
        self.started_ray = False
        # Joined a cluster (or one of several Serve replicas): actors are detached and shared.
        self.shared = bool(self.address) if shared is None else shared
        self._shards: dict[int, ray.actor.ActorHandle] = {}
        self._policies: dict[tuple[str, int, int], MemberHandle] = {}
        self._embedder: ray.actor.ActorHandle | None = None
        self.home_id = hashlib.blake2b(str(self.home.root).encode(), digest_size=4).hexdigest()
        # Appends and reads give up after this (RuntimeUnavailable) instead of waiting for a lost node forever.
        self.call_timeout_s = config.ray.call_timeout_seconds
        self.retries = 0  # idempotent calls tried again after an actor restart (status, tests)
        # shard -> the last seq of an append this runtime acknowledged (read-your-writes without asking the shard)
        self._acked: dict[int, int] = {}
        self._acked_lock = threading.Lock()

    @property
    def description(self) -> str:
        if self.started_ray:
            return "Ray (a local instance of this server)"
        return f"Ray at {self.address}" if self.address else "Ray (the instance this process runs in)"

    @property
    def owns_actors(self) -> bool:
        return not self.shared

    @property
    def sole_writer(self) -> bool:
        return not self.shared  # detached, shared actors: other processes may append too

    def start(self) -> "RayRuntime":
        self.started_ray = init_ray(
            home=self.home.root, address=self.address, namespace=self.config.ray.namespace,
            num_cpus=self.config.ray.num_cpus, timeout_s=self.config.ray.start_timeout_seconds,
        ) or self.started_ray
        self._check_nodes()
        return self

    # ------------------------------------------------------------------ placement

    def _check_nodes(self) -> None:
        """With a cluster layout, every shard's node is up (offers the shard's resource) before anything starts:
        an actor pinned to a missing node would wait forever, and one placed elsewhere would find no files."""
        cluster = self.config.cluster
        if not cluster.pinned:
            return
        offered = ray.cluster_resources()
        missing = [s for s in self.all_shards() if offered.get(cluster.resource(s), 0) <= 0]
        if missing:
            from engram.runtime.startup import RayStartError

            lines = [f"shard {s} (node {cluster.node_of(s)!r}): no Ray node offers the resource {cluster.resource(s)!r}"
                     for s in missing]
            by_node: dict[str, list[str]] = {}
            for s in missing:
                node = cluster.node_of(s)
                if node is not None:  # a pinned layout places every shard (ClusterConfig.check)
                    by_node[node] = [cluster.resource(x) for x in cluster.nodes[node]]
            hints = [f"on node {n!r}: ray start --address <head> --resources '" + "{" + ", ".join(f'"{r}": 1' for r in rs) + "}'"
                     for n, rs in by_node.items()]
            raise RayStartError("; ".join(lines) + ". Start the node(s) holding them: " + "; ".join(hints))

    def placement(self, shard: int) -> dict:
        """Ray options that pin an actor of `shard` to the node holding the shard's files (none on one machine)."""
        cluster = self.config.cluster
        if not cluster.pinned:
            return {}
        from engram.config.service import SHARD_RESOURCE_SHARE

        return {"resources": {cluster.resource(shard): SHARD_RESOURCE_SHARE}, "num_cpus": 0}

    def record_placement(self) -> dict[int, dict]:
        """Where each shard's actor runs, recorded in the home's layout (which node holds which shard)."""
        wheres = get([s.where.remote() for s in self.shards()])
        nodes = {}
        for shard, where in enumerate(wheres):
            nodes[shard] = {"node": self.config.cluster.node_of(shard), **{k: where[k] for k in ("node_id", "address")}}
        self.home.record_nodes(nodes)
        return nodes

    def shard_nodes(self) -> dict[int, str]:
        return {s: self.describe_node(s, w) for s, w in enumerate(get([h.where.remote() for h in self.shards()]))}

    def export_parquet(self, shards, out_dir, on_shard=None) -> list[dict]:
        return self._each(shards, lambda h: h.export_parquet.remote(out_dir), on_shard)

    def describe_node(self, shard: int | None, where: dict) -> str:
        name = self.config.cluster.node_of(shard) if shard is not None else None
        text = f"{where['address']} (node {where['node_id'][:12]})"
        return f"{name}: {text}" if name else text

    # ------------------------------------------------------------------ actors

    def actor_name(self, role: str) -> str:
        return f"engram-{self.home_id}-{role}"

    def _options(self, role: str, **extra) -> dict:
        # enable_task_events=False: Ray's GCS keeps an event of every actor call (up to 100,000, for a dashboard engram
        # does not start), which grew with the calls, hence with the agents: 55 -> 104 MB at 100 -> 1,000 agents.
        options = dict(name=self.actor_name(role), get_if_exists=True, enable_task_events=False, **extra)
        if self.namespace is not None:
            options["namespace"] = self.namespace
        if self.shared:
            options["lifetime"] = "detached"
        return options

    def embedder_name(self) -> str:
        from engram.actors.embedder import EMBEDDER_ROLE

        return self.actor_name(EMBEDDER_ROLE)

    def embedder(self) -> ray.actor.ActorHandle:
        """The home's EmbedderActor: the "embedder" service of its policies and projections (started
        before them, so that this runtime owns it; its model loads when the policies start)."""
        if self._embedder is None:
            from engram.actors.embedder import EMBEDDER_ROLE, EmbedderActor
            from engram.providers.embeddings.factory import index_time

            # (`options`: an @ray.remote class's; the decorator's typing cannot say so, see engram.actors.embedder)
            self._embedder = EmbedderActor.options(**self._options(EMBEDDER_ROLE)).remote(  # type: ignore[attr-defined]
                str(self.home.root), index_time(self.config.embedder).model_dump(mode="json")
            )
        return self._embedder

    def shard(self, index: int) -> ray.actor.ActorHandle:
        handle = self._shards.get(index)
        if handle is None:
            self.embedder()  # projections may embed: the embedder exists before the shard
            limits = self.config.limits
            options = self._options(f"shard-{index:03d}", max_concurrency=SHARD_ACTOR_CONCURRENCY, **self.placement(index))
            handle = ShardActor.options(**options).remote(  # type: ignore[attr-defined]  # an @ray.remote class's
                str(self.home.log_path(index)), str(self.home.projections_dir), index, limits.max_batch_events,
                limits.max_payload_bytes, self.config.model_dump(mode="json"), self.embedder_name(),
            )
            self._shards[index] = handle
        return handle

    def shards(self, indexes: Sequence[int] | None = None) -> list[ray.actor.ActorHandle]:
        return [self.shard(i) for i in (self.all_shards() if indexes is None else indexes)]

    def policies(self) -> dict[tuple[str, int, int], MemberHandle]:
        """The policy group members, (group, shard, member) -> the handle of that member in its policy actor; the
        actors (processes, `engram.policies.registry.processes`: several members may share one) started on first use."""
        from engram.policies.registry import GROUPS

        if GROUPS and not self._policies:
            self.embedder().warm.remote()  # the policies embed: load the model while they start
        for shard in self.all_shards():
            for slots in self._policy_processes():
                if all((group, shard, member) in self._policies for group, member in slots):
                    continue
                self.shard(shard)
                # Each member its own share of the threads that serve calls, as in a process of its own: a member's
                # slow calls (a drain, a read waiting for a Summarizer's LLM) never hold up another member's.
                options = self._options(process_role(slots, shard), max_concurrency=POLICY_ACTOR_CONCURRENCY * len(slots),
                                        **self.placement(shard))
                members = [(group, GROUPS[group][1], member, pool_size(group, self.config.ray.pools))
                           for group, member in slots]
                # `options`: an @ray.remote class's (see engram.actors.policy)
                actor = PolicyActor.options(**options).remote(  # type: ignore[attr-defined]
                    self.config.model_dump(mode="json"), self.actor_name(f"shard-{shard:03d}"), shard, members,
                    self.embedder_name(),
                )
                for group, member in slots:
                    self._policies[(group, shard, member)] = MemberHandle(actor, slot_key(group, member))
        return dict(self._policies)

    def _policy_processes(self) -> list[list[tuple[str, int]]]:
        return policy_processes(self.config.ray.pools, self.config.ray.processes)

    def _policy_actors(self) -> list:
        """Each policy actor (process) once, whatever number of group members it hosts."""
        return list({id(h.actor): h.actor for h in self._policies.values()}.values())

    def start_policies(self) -> None:
        self.policies()
        get([s.head.remote() for s in self.shards()])  # the shard actors are up
        self.record_placement()

    def _member(self, group: str, agent: str, key: str) -> MemberHandle:
        members = pool_size(group, self.config.ray.pools)
        return self.policies()[(group, self.shard_of(agent), owner(key, members))]

    # ------------------------------------------------------------------ the log

    def retrying(self, call: Callable, idempotent: bool):
        """`call()`; when it meets a restarting actor (RuntimeUnavailable) and is idempotent, again, with backoff.
        A call that is not idempotent is never repeated: its caller learns it may not have happened."""
        attempts = IDEMPOTENT_ATTEMPTS if idempotent else 1
        for attempt in range(attempts):
            try:
                return call()
            except RuntimeUnavailable:
                if attempt == attempts - 1:
                    raise
                self.retries += 1
                time.sleep(RETRY_BASE_S * 2 ** attempt)
        raise AssertionError("unreachable")

    def append(self, writes: Sequence[Write]) -> list[Appended]:
        """Appends of several shards at once, each bounded by its shard's window. Retried after an actor restart
        only when every event carries an event id (the log then refuses a repeat): otherwise a retry could
        append twice."""
        idempotent = all(e.event_id is not None for w in writes for e in w.events)
        with self.routing_gate.shared(self.call_timeout_s):
            by_shard: dict[int, list[int]] = {}
            for i, w in enumerate(writes):
                by_shard.setdefault(self.shard_of(w.agent), []).append(i)
            results: list[Appended | None] = [None] * len(writes)
            with ExitStack() as held:
                for s in sorted(by_shard):
                    held.enter_context(self.window(s))

                def send(s: int) -> list:
                    return get(self.shard(s).append_many.remote([writes[i] for i in by_shard[s]]), self.call_timeout_s)

                refs: dict[int, ray.ObjectRef[list[Appended]]] = {
                    s: self.shard(s).append_many.remote([writes[i] for i in idx]) for s, idx in by_shard.items()}
                for s, ref in refs.items():
                    try:
                        answered = get(ref, self.call_timeout_s)
                    except RuntimeUnavailable:
                        if not idempotent:
                            raise
                        answered = self.retrying(lambda s=s: send(s), True)
                    for i, res in zip(by_shard[s], answered):
                        results[i] = res
                    self._acknowledged(s, answered)
            return results  # type: ignore[return-value]

    def _acknowledged(self, shard: int, answered: Sequence[Appended]) -> None:
        seqs = [max(a.seqs) for a in answered if a.seqs]
        if seqs and shard in self._acked:
            with self._acked_lock:
                self._acked[shard] = max(self._acked[shard], max(seqs))

    def _read_your_writes(self, shard: int) -> int:
        """The position a fresh read of `shard` must see: every append this runtime has acknowledged (the shard's
        head the first time, so that a restarted reader catches up with the whole log first). With other processes
        appending too (not `sole_writer`), the shard's head now."""
        if not self.sole_writer or shard not in self._acked:
            head = get(self.shard(shard).head.remote(), self.call_timeout_s)
            if not self.sole_writer:
                return head
            with self._acked_lock:
                self._acked[shard] = max(self._acked.get(shard, 0), head)
        return self._acked[shard]

    def read(self, agent: str, after: int = 0, **filters) -> list[Recorded]:
        shard = self.shard_of(agent)
        return self.retrying(lambda: get(self.shard(shard).read.remote(after, agent=agent, **filters),
                                         self.call_timeout_s), True)

    def read_seqs(self, agent: str, seqs: Sequence[int]) -> list[Recorded]:
        shard = self.shard(self.shard_of(agent))
        refs = [shard.read.remote(lo - 1, to_seq=hi, limit=None, agent=agent) for lo, hi in seq_ranges(seqs)]
        wanted = set(seqs)
        return [r for batch in get(refs) for r in batch if r.seq in wanted]

    def heads(self) -> dict[int, int]:
        return dict(enumerate(get([s.head.remote() for s in self.shards()])))

    def streams(self) -> set[tuple[str, str]]:
        return {key for streams in get([s.streams.remote() for s in self.shards()]) for key in streams}

    # ------------------------------------------------------------------ reading

    def sql(self, query: str, params: list | None = None) -> tuple[list[str], list[tuple]]:
        results = get([s.query.remote(query, params) for s in self.shards()])
        return results[0][0], [row for _, rows in results for row in rows]

    def user_sql(self, query: str, params: list | None = None, *, agents=None, timeout_s=None, max_rows=None):
        """One shard: confined there. Several: each shard sends the relations the query reads (only `agents`' rows
        when given) and the statement runs once, confined, over all of them (`engram.sql.gathered`): aggregates,
        ORDER BY/LIMIT and joins across shards are exact."""
        if self.config.shards == 1:
            return merge_results(get([self.shard(0).sql.remote(query, params, agents, timeout_s, max_rows)]), max_rows)
        from engram.sql.gathered import GatheredShards, referenced
        from engram.config.home import ProjectionPaths
        from engram.sql import run_readonly

        names = referenced(query)
        wanted = None if names is None else sorted(names)
        parts = get([s.relations.remote(wanted, agents) for s in self.shards()])
        source = GatheredShards(dict(enumerate(parts)), ProjectionPaths(self.home.projections_dir))
        return run_readonly(query, source, params=params, agents=agents, timeout_s=timeout_s, max_rows=max_rows)

    def shard_status(self) -> list[dict]:
        handles = self.policies()
        shard_refs: list[tuple[ray.ObjectRef[dict], ray.ObjectRef[dict]]] = [
            (s.status.remote(), s.where.remote()) for s in self.shards()]
        policy_refs: list[tuple[ray.ObjectRef[dict], ray.ObjectRef[dict]]] = [
            (h.status.remote(), h.where.remote()) for h in handles.values()]
        shards = get([r for pair in shard_refs for r in pair])
        reports = get([r for pair in policy_refs for r in pair])
        shards, wheres = shards[0::2], shards[1::2]
        for st, where in zip(shards, wheres):
            st["node"] = self.describe_node(st["shard"], where)
            st["actors"] = {f"shard-{st['shard']:03d}": st["node"]}
        # each group member under the name of the process (the actor) hosting it, as Ray lists it
        roles = {(group, s, member): process_role(slots, s) for s in self.all_shards()
                 for slots in self._policy_processes() for group, member in slots}
        for (group, shard, member), rep, where in zip(handles, reports[0::2], reports[1::2]):
            shards[shard].setdefault("consumers", {}).update(rep["positions"])
            shards[shard]["actors"][roles[(group, shard, member)]] = self.describe_node(shard, where)
            if rep["errors"]:
                shards[shard].setdefault("consumer_errors", {}).update(rep["errors"])
            if rep.get("rebuilt"):  # snapshots that were not restored: these policies rebuild from the log
                shards[shard].setdefault("consumers_rebuilt", {}).update(rep["rebuilt"])
        return shards

    def progress(self) -> list[dict]:
        handles = self.policies()
        shards = get([s.progress.remote() for s in self.shards()])
        for (group, shard, member), positions in zip(handles, get([h.positions.remote() for h in handles.values()])):
            shards[shard].setdefault("consumers", {}).update(positions)
        return shards

    def wait_projections(self, timeout: float = 120.0) -> bool:
        shards = self.shards()
        heads = get([s.head.remote() for s in shards])
        return all(get([s.wait_projections.remote(h, timeout) for s, h in zip(shards, heads)]))

    def recall(self, agent: str, query: str, *, min_position: int | None, now_us: int, **options):
        if min_position is None:
            min_position = self._read_your_writes(self.shard_of(agent))
        reader = self._member(READER_GROUP, agent, agent)
        # One argument (see PolicyActor.call): Ray serializes each argument and keyword of a call on its own.
        return get(reader.call.remote((READER_POLICY, "recall", (agent, query),
                                       {"min_position": min_position, "now_us": now_us, **options})))

    def reach(self, agent: str, seq: int, consumers: Sequence[str], *, discussion: str | None,
              timeout: float) -> Lagging | None:
        shard = self.shard_of(agent)
        deadline = time.monotonic() + timeout
        target = seq
        for name in consumers:
            if name == PROJECTIONS:
                left = max(0.0, deadline - time.monotonic())
                # A condition at the shard, woken by each fold (ShardHost.wait_projections): no poll of the log.
                if not get(self.shard(shard).wait_projections.remote(target, left), left + self.call_timeout_s):
                    position = get(self.shard(shard).projection_position.remote(), self.call_timeout_s)
                    return Lagging(f"the projections of shard {shard}", shard, position)
                continue
            if name in DISCUSSION_GROUPS and not discussion:  # every discussion of the agent: every member
                handles = [h for (g, s, _), h in sorted(self.policies().items()) if g == name and s == shard]
            else:
                handles = [self._member(name, agent, discussion if name in DISCUSSION_GROUPS and discussion else agent)]
            reached = target
            for handle in handles:
                try:
                    position, head = get(handle.reach.remote(target), max(0.0, deadline - time.monotonic()))
                except RuntimeUnavailable:  # not within the wait: the call goes on in the actor, the read gives up
                    position = get(handle.positions.remote(), self.call_timeout_s)
                    return Lagging(f"the {name} policies of shard {shard}", shard, min(position.values(), default=0))
                if position < min(target, head):  # a failing policy (an unreachable LLM) keeps its position
                    return Lagging(f"the {name} policies of shard {shard}", shard, position)
                reached = max(reached, head)
            target = reached  # what they appended for the position comes next
        return None

    def drain_summarizer(self, agent: str, discussion: str) -> str:
        handle = self._member(SUMMARIZER_GROUP, agent, discussion)
        get(handle.drain.remote())
        self.wait_projections()
        error = get(handle.status.remote())["errors"].get("summarizer")
        return f"the Summarizer failed and will retry: {error}" if error else ""

    # ------------------------------------------------------------------ whole-shard work

    def _each(self, shards: Sequence[int], call: Callable, on_done: Callable | None) -> list:
        """Run `call(handle)` on every shard at once; `on_done(result)` as each finishes."""
        refs = {call(self.shard(i)): i for i in shards}
        results = {}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            results[refs[done[0]]] = get(done[0])
            if on_done:
                on_done(results[refs[done[0]]])
        return [results[i] for i in shards]

    def replay_into(self, shards, out_dir, to_seq, until_us, on_shard=None) -> list[dict]:
        return self._each(shards, lambda h: h.replay_into.remote(out_dir, to_seq, until_us), on_shard)

    def rebuild(self, shards, on_shard=None) -> list[dict]:
        return self._each(shards, lambda h: h.rebuild.remote(), on_shard)

    def verify_replay(self, shards, on_shard=None) -> list[str]:
        return [d for diffs in self._each(shards, lambda h: h.verify_replay.remote(), on_shard) for d in diffs]

    def shard_call(self, shard: int, method: str, *args):
        return get(getattr(self.shard(shard), method).remote(*args))

    # ------------------------------------------------------------------ the embedder (see Runtime.reindex)

    def prepare_vectors(self, target, texts, on_progress=None) -> str:
        """The home's embedder actor embeds `texts` with `target` into its cache (it is the cache's only writer),
        a step at a time for the progress, while it goes on serving with its own embedder."""
        from engram.providers.embeddings.factory import REEMBED_STEP

        payload = target.model_dump(mode="json")
        name = get(self.embedder().prepare.remote(payload, []))
        for start in range(0, len(texts), REEMBED_STEP):
            get(self.embedder().prepare.remote(payload, texts[start : start + REEMBED_STEP]))
            if on_progress is not None:
                on_progress(min(start + REEMBED_STEP, len(texts)), len(texts))
        return name

    def target_vectors(self, target, texts):
        return get(self.embedder().prepared_embed.remote(list(texts)))

    def open_generations(self, shards) -> None:
        """Each shard's new generation embeds through the embedder actor's prepared embedder (`PreparedEmbedder`)."""
        get([self.shard(s).open_generation.remote() for s in shards])

    def shard_calls(self, method: str, args: dict[int, tuple]) -> dict:
        refs = {s: getattr(self.shard(s), method).remote(*a) for s, a in args.items()}
        return dict(zip(refs, get(list(refs.values()))))

    def switch_embedder(self, target) -> None:
        """The shard actors and the embedder actor are closed and ended (their names freed); the next call starts
        them again with `target` (the policies are stopped by the caller)."""
        names = [self.actor_name(f"shard-{s:03d}") for s in self._shards]
        for h in self._shards.values():
            get(h.close.remote())
            ray.kill(h)
        self._shards.clear()
        if self._embedder is not None:
            from engram.actors.embedder import EMBEDDER_ROLE

            get(self._embedder.close.remote())
            ray.kill(self._embedder)
            self._embedder = None
            names.append(self.actor_name(EMBEDDER_ROLE))
        self._wait_names_free(names)
        self.config = self.config.model_copy(update={"embedder": target})

    def _wait_names_free(self, names: list[str]) -> None:
        """Return once no actor holds any of `names` (killed actors free theirs a moment later), at most 60 s."""
        deadline = time.monotonic() + 60
        for name in names:
            while time.monotonic() < deadline:
                try:
                    ray.get_actor(name)
                except ValueError:
                    break
                time.sleep(0.1)

    def stop_policies(self) -> None:
        """Close every policy actor (snapshots saved) and end it; returns once their names are free, so that
        `start_policies` makes new actors rather than finding the dying ones by name."""
        if not self._policies:
            return
        actors = self._policy_actors()
        get([a.close.remote() for a in actors])
        names = [self.actor_name(process_role(slots, s)) for s in self.all_shards() for slots in self._policy_processes()]
        for a in actors:
            ray.kill(a)
        self._policies.clear()
        self._wait_names_free(names)

    def forget(self, agent: str, discussion: str | None, reason: str, memory: tuple[str, str] | None = None) -> dict:
        """`engram.shard.forget.forget` over the shard actor and the shard's policy actors: the policies pause (their
        loops stop reading the log), drop their snapshots, drain to the marker, and after the shard has erased its
        log and rebuilt its projections, every policy whose state still holds forgotten text rebuilds from the log."""
        from engram.shard.forget import forget

        index = self.shard_of(agent)
        hosts = [_Remote(h) for (_, s, _), h in sorted(self.policies().items()) if s == index]
        try:
            return forget(_Remote(self.shard(index)), hosts, agent, discussion, reason=reason, memory=memory)
        except KeyError as exc:
            raise LookupError(str(exc).strip("\"'")) from None

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close owned actors cleanly (projections checkpointed, DuckDB closed); stop Ray if we started it."""
        if self.owns_actors and ray.is_initialized():
            # Policies first (they append to the shards), then the shards, then the embedder they used.
            for group in (self._policy_actors(), list(self._shards.values())):
                if group:
                    closing: list[tuple[ray.actor.ActorHandle, ray.ObjectRef[bool]]] = [
                        (h, h.close.remote()) for h in group]  # all at once
                    for h, ref in closing:
                        # An actor that is restarting (a node lost, a kill) closes once it is back; one that stays
                        # gone has nothing open that the log cannot rebuild.
                        try:
                            get(ref)
                        except RuntimeUnavailable:
                            try:
                                self.retrying(lambda h=h: get(h.close.remote()), idempotent=True)
                            except RuntimeUnavailable:
                                pass
                    for h in group:
                        ray.kill(h)
            if self._embedder is not None:
                try:
                    ray.get(self._embedder.close.remote())  # its cache file
                except ray.exceptions.RayActorError:
                    pass  # already gone: nothing left open
                ray.kill(self._embedder)
        self._policies.clear()
        self._shards.clear()
        self._embedder = None
        if self.started_ray:
            ray.shutdown()
            self.started_ray = False

    def stop_named_actors(self) -> None:
        """Close and end the home's named actors, whoever started them (a Serve deployment's replicas)."""
        from engram.actors.embedder import EMBEDDER_ROLE

        names = [self.actor_name(process_role(slots, s)) for s in self.all_shards() for slots in self._policy_processes()]
        names += [self.actor_name(f"shard-{s:03d}") for s in self.all_shards()] + [self.actor_name(EMBEDDER_ROLE)]
        # Named actors live in the namespace of the job that made them (a Serve application's, here).
        where = {a["name"]: a["namespace"] for a in ray.util.list_named_actors(all_namespaces=True)}
        for name in names:  # policies, then shards, then the embedder: the order `close` keeps
            if name not in where:
                continue
            try:
                handle = ray.get_actor(name, namespace=where[name])
            except ValueError:
                continue
            try:
                ray.get(handle.close.remote(), timeout=120)
            except Exception:  # already gone or stuck: it is ended below either way
                pass
            ray.kill(handle)

    def __enter__(self) -> "RayRuntime":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


class _Remote:
    """An actor's methods called as plain ones (one `get` each): what `engram.shard.forget` drives."""

    def __init__(self, handle):
        self._handle = handle

    def __getattr__(self, name):
        method = getattr(self._handle, name)

        def call(*args, **kwargs):
            return get(method.remote(*args, **kwargs))

        return call

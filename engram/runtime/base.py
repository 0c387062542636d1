"""The one interface the API needs from a runtime: the port every runtime implements.

Two runtimes implement it and pass one contract suite (tests/api/test_runtime_contract.py):

- `engram.runtime.ray_runtime.RayRuntime`: shard, policy and embedder actors on Ray (the
  embedded default inside `engram serve`, or a cluster);
- `engram.runtime.inprocess.InProcessRuntime`: the same parts (shard hosts, policy hosts) in this
  process, synchronous, without Ray: for tests and for embedding engram in one process.

Ray handles, placement, pools and `ray.get` live only behind this interface: the API imports this
module and nothing else of the runtime layer (no implementation, no actor, no Ray; an import contract
says so), and the composition roots (`engram.boot.serve`, `engram.boot.embedded`) pick an implementation.
"""

from __future__ import annotations

import hashlib
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

from engram.events.envelope import Appended, Recorded, Write
from engram.kernel.gate import SharedExclusiveLock
from engram.kernel.ids import validate_agent
from engram.kernel.idle import PROJECTIONS  # noqa: F401 (the runtimes' name for the projections in `reach`)
from engram.kernel.sharding import ShardMap

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from engram.config.home import Home
    from engram.config.llm import EmbedderConfig
    from engram.config.service import ServiceConfig
    from engram.kernel.flow import InFlight
    from engram.memory.cognitive.retrieval import RecallResult
    from engram.sql import QueryResult

# A report of whole-shard work or status (a shard's head, positions, counts...): JSON, shown as it is.
Report = dict[str, Any]
# SQL result rows, as DuckDB returns them.
Row = tuple[Any, ...]

# How often `wait_idle` looks at the consumers' positions.
IDLE_POLL_S = 0.1


class QueryError(ValueError):
    """SQL that failed (the message is the database's)."""


class MissingTable(QueryError):
    """SQL over a table or view that does not exist yet (e.g. no projection has written it)."""


class RuntimeUnavailable(RuntimeError):
    """The runtime cannot serve (an actor died and is restarting, Ray is down); the message says what."""


def _resharding() -> RuntimeUnavailable:
    return RuntimeUnavailable("the home is being re-sharded; retry the append in a moment")


# Policy groups whose members are placed by discussion rather than by agent (engram.policies.registry.GROUPS).
DISCUSSION_GROUPS = frozenset({"summarizer", "context"})


@dataclass(frozen=True)
class Lagging:
    """What a read `after` a position waited for in vain: a consumer (`what`, for a message) and where it is."""

    what: str
    shard: int
    position: int


class Runtime(ABC):
    """Where the shards, projections and policies of one engram home run."""

    # Set by `_open_home`, which every runtime's constructor calls first.
    config: ServiceConfig  # its `shards`: the home's count, from its layout
    home: Home
    layout: ShardMap  # agent -> shard routing, from <home>/layout.json
    configured_embedder: EmbedderConfig  # engram.json's; `config.embedder` is the one serving until `reindex`

    def _open_home(self, config: ServiceConfig) -> ServiceConfig:
        """The home of `config`, its layout read (created or upgraded), the cluster placement checked against its
        shard count, before anything starts. Returns `config` with the home's shard count."""
        from engram.config.home import Home, HomeLayoutError

        from engram.config.serving_embedder import serving_embedder

        self.home = Home(config.home, config.shards)
        has_data = bool(self.home.existing_log_paths())
        self.layout = self.home.layout_check()
        try:
            config.cluster.check(self.layout.shards)
        except ValueError as exc:
            raise HomeLayoutError(f"{config.home}: {exc}") from None
        # The embedder of engram.json; the home serves with the one its vectors were made by until `reindex`.
        self.configured_embedder = config.embedder
        serving = serving_embedder(self.home.root, config.embedder, has_data=has_data)
        return config.model_copy(update={"shards": self.layout.shards, "embedder": serving})

    # ------------------------------------------------------------------ life cycle

    @abstractmethod
    def start(self) -> "Runtime":
        """Start (or join) what runs the home; idempotent."""

    @abstractmethod
    def start_policies(self) -> None:
        """Make sure the policies (memory creation in the background) run; idempotent."""

    @abstractmethod
    def close(self) -> None:
        """Stop cleanly: projections checkpointed, DuckDB files closed."""

    @property
    def sole_writer(self) -> bool:
        """Whether every append to the home goes through this runtime object (one process: `engram serve`, or an
        embedded engram). The API may then trust what it remembers of its own appends (the proxy's tail record);
        several processes sharing the actors (Ray Serve replicas, a joined cluster) must read the log instead."""
        return True

    @property
    @abstractmethod
    def description(self) -> str:
        """One line for `engram status`: what runs the home (e.g. "Ray (local instance)")."""

    # ------------------------------------------------------------------ the log

    def shard_of(self, agent: str) -> int:
        return self.layout.shard_of(validate_agent(agent))

    @abstractmethod
    def append(self, writes: Sequence[Write]) -> list[Appended]:
        """Append writes; those of one shard commit together, all or nothing."""

    @abstractmethod
    def read(self, agent: str, after: int = 0, **filters: Any) -> list[Recorded]:
        """Events of `agent`'s shard after `after` (filters: stream, types, limit, to_seq, agent)."""

    @abstractmethod
    def read_seqs(self, agent: str, seqs: Sequence[int]) -> list[Recorded]:
        """The events of `agent`'s shard at positions `seqs` (point reads, all at once), in seq order."""

    @abstractmethod
    def heads(self) -> dict[int, int]:
        """The last seq of every shard."""

    @abstractmethod
    def streams(self) -> set[tuple[str, str]]:
        """Every stream of the home, named (agent, stream): two agents may each have a discussion of the same id."""

    # ------------------------------------------------------------------ reading

    @abstractmethod
    def sql(self, query: str, params: list[Any] | None = None) -> tuple[list[str], list[Row]]:
        """engram's own SQL (read models) over the log and the projections, shard by shard, rows concatenated;
        confined like a user's (`ShardHost.query`), without a row limit. Raises MissingTable or QueryError."""

    def expected_files(self, agent: str, discussion: str) -> tuple[bool, bool, bool]:
        """Which of `agent`'s `discussion` files (memories, summary, vector store) the projections say exist, at the
        agent's shard only (`ShardHost.expected_files`)."""
        memories, summary, vectors = self.shard_call(self.shard_of(agent), "expected_files", agent, discussion)
        return bool(memories), bool(summary), bool(vectors)

    @abstractmethod
    def user_sql(self, query: str, params: list[Any] | None = None, *, agents: Sequence[str] | None = None,
                 timeout_s: float | None = None, max_rows: int | None = None) -> QueryResult:
        """A user's SQL: one read-only statement, confined (`engram.sql.run_readonly` on every shard: no file,
        network or extension access, locked configuration), stopped after `timeout_s`, at most `max_rows` rows,
        only `agents`' rows when given. Returns an `engram.sql.QueryResult`; raises `engram.sql.SqlError`."""

    @abstractmethod
    def shard_status(self) -> list[Report]:
        """Per shard: head, projection positions and lag, consumer positions, errors, event counts."""

    def progress(self) -> list[Report]:
        """Per shard: the head, the projections' positions and the consumers' (`consumers` reads them). What
        `wait_idle` looks at ten times a second: a runtime answers it without the queries of `shard_status`."""
        return self.shard_status()

    @abstractmethod
    def wait_projections(self, timeout: float = 120.0) -> bool:
        """Wait until every shard's projections have folded everything appended so far."""

    @abstractmethod
    def recall(self, agent: str, query: str, *, min_position: int | None, now_us: int,
               **options: Any) -> RecallResult:
        """The trace reader's recall (engram.memory.cognitive.retrieval.RecallResult) for `agent`; it
        first folds the log up to `min_position` (read-your-writes) and records a TraceRetrieved after."""

    @abstractmethod
    def reach(self, agent: str, seq: int, consumers: Sequence[str], *, discussion: str | None,
              timeout: float) -> "Lagging | None":
        """Read-your-writes: return once every consumer in `consumers` has handled `agent`'s shard up to `seq`, in
        order: a policy group ("auto-ingest", "summarizer", "traces"…: the member that owns the agent, or the
        discussion for the groups placed by discussion) handles the log up to the position, and the consumers after
        it then reach what it appended meanwhile; "projections" is the shard's fold (durable: files and rows
        written). Waits without polling the log (a condition at the shard, a catch-up call at a policy actor).
        None when reached; else what lags, after at most `timeout` seconds."""

    @abstractmethod
    def drain_summarizer(self, agent: str, discussion: str) -> str:
        """The Summarizer owning `discussion` has handled the whole log and the projections show it.
        Returns the Summarizer's failure (empty when it succeeded)."""

    # ------------------------------------------------------------------ whole-shard work

    @abstractmethod
    def replay_into(self, shards: Sequence[int], out_dir: str, to_seq: int | None, until_us: int | None,
                    on_shard: Callable[[Report], None] | None = None) -> list[Report]:
        """Rebuild the projections of `shards` from the log into `out_dir`; no LLM call."""

    @abstractmethod
    def rebuild(self, shards: Sequence[int], on_shard: Callable[[Report], None] | None = None) -> list[Report]:
        """Rebuild the live projections of `shards` from the log."""

    @abstractmethod
    def verify_replay(self, shards: Sequence[int], on_shard: Callable[[list[str]], None] | None = None) -> list[str]:
        """Replay into scratch space and compare with the live projections; the differences."""

    def shard_nodes(self) -> dict[int, str]:
        """Shard -> the node its actor runs on (for reports)."""
        import socket

        return {s: socket.gethostname() for s in self.all_shards()}

    def export_parquet(self, shards: Sequence[int], out_dir: str,
                       on_shard: Callable[[Report], None] | None = None) -> list[Report]:
        """Each shard writes its log and projections as Parquet into `out_dir` (on the node that holds it)."""
        reports: list[Report] = []
        for shard in shards:
            reports.append(self.shard_call(shard, "export_parquet", out_dir))
            if on_shard:
                on_shard(reports[-1])
        return reports

    @abstractmethod
    def forget(self, agent: str, discussion: str | None, reason: str, memory: tuple[str, str] | None = None) -> Report:
        """Erase a discussion (or the whole agent, or one memory: `memory` = (kind, id)) from the log file and the
        projections."""

    # ------------------------------------------------------------------ re-sharding

    @abstractmethod
    def shard_call(self, shard: int, method: str, *args: Any) -> Any:
        """Call `method` of shard `shard`'s host (`engram.shard.host.ShardHost`), wherever it runs; its result."""

    @abstractmethod
    def stop_policies(self) -> None:
        """Stop every policy (snapshots saved); `start_policies` starts them again."""

    def window(self, shard: int) -> InFlight:
        """The appends in flight to `shard` (`engram.kernel.flow.InFlight`): bounded by `limits.maxInflightAppends`;
        past the bound a producer waits up to `limits.backpressureWaitSeconds`, then gets Backpressure (429)."""
        from engram.kernel.flow import InFlight

        windows: dict[int, InFlight] = self.__dict__.setdefault("_windows", {})
        w = windows.get(shard)
        if w is None:
            limits = self.config.limits
            w = windows.setdefault(shard, InFlight(f"shard {shard}", limits.max_inflight_appends,
                                                   limits.backpressure_wait_seconds))
        return w

    @property
    def routing_gate(self) -> SharedExclusiveLock:
        gate: SharedExclusiveLock | None = self.__dict__.get("_routing_gate")
        if gate is None:
            gate = self.__dict__.setdefault("_routing_gate", SharedExclusiveLock(on_timeout=_resharding))
        return gate

    def reshard(self, new_count: int, on_progress: Callable[[int, int], None] | None = None) -> Report:
        """Grow the home to `new_count` shards, moving only the agents the new layout places elsewhere.

        Appends wait meanwhile (the routing gate). The policies stop; each moving agent's events are copied,
        in seq order and at their own positions, from its shard to the new shard split off it; the layout is
        switched (one atomic file write: from here on the new shards answer for them); the old shards drop the
        moved events and rebuild their projections; the policies of the shards involved refold their logs from
        the start (their snapshots described the old split; the ids of what they append again make the log
        refuse the repeats). `on_progress(events_copied, events_to_copy)`.
        """
        from engram.kernel.sharding import ReshardError

        try:
            self.config.cluster.check(new_count)
        except ValueError as exc:
            raise ReshardError(f"place the new shards in engram.json first: {exc}") from None
        started = time.perf_counter()
        with self.routing_gate.exclusive():
            self.wait_projections()
            agents = sorted({agent for agent, _ in self.streams()})
            moves = self.layout.plan(new_count, agents)
            grown = self.layout.grown(new_count, agents)
            pairs: dict[tuple[int, int], list[str]] = {}
            for agent, pair in moves.items():
                pairs.setdefault(pair, []).append(agent)
            counts = {pair: self._count_events(pair[0], movers) for pair, movers in pairs.items()}
            total = sum(counts.values())
            self.stop_policies()
            old_count = self.config.shards
            self.config = self.config.model_copy(update={"shards": new_count})
            copied = 0
            try:
                for (parent, child), movers in sorted(pairs.items()):
                    if self.shard_call(child, "head") != 0:
                        raise ReshardError(f"shard {child} already has events: re-sharding writes only into new shards")
                    after = 0
                    while True:
                        table: pa.Table = self.shard_call(parent, "export_agents", movers, after)
                        if table.num_rows == 0:
                            break
                        copied += self.shard_call(child, "import_rows", table)
                        after = table.column("seq")[-1].as_py()
                        if on_progress:
                            on_progress(copied, total)
                    have = self._count_events(child, movers)
                    if have != counts[(parent, child)]:
                        raise ReshardError(f"shard {child} received {have} events of the moving agents, "
                                           f"shard {parent} has {counts[(parent, child)]}: nothing was switched")
            except BaseException:
                self.config = self.config.model_copy(update={"shards": old_count})
                self.start_policies()
                raise
            self.home.write_layout(grown)  # the switch
            self.layout = grown
            self.home.shards = new_count
            removed = [self.shard_call(parent, "remove_agents", sorted({a for (p, _), m in pairs.items() if p == parent
                                                                          for a in m}))
                       for parent in sorted({p for p, _ in pairs})]
            touched = sorted({s for pair in pairs for s in pair})
            self.forget_policy_state(touched)
            self.start_policies()
        return {"shards": {"before": old_count, "after": new_count}, "agents": len(agents), "agents_moved": len(moves),
                "moves": {a: list(pair) for a, pair in sorted(moves.items())}, "events_moved": copied,
                "removed": removed, "seconds": round(time.perf_counter() - started, 3)}

    def _count_events(self, shard: int, agents: Sequence[str]) -> int:
        return int(self.shard_call(shard, "count_events", list(agents)))

    # ------------------------------------------------------------------ the embedder: what to re-embed, reindex

    def embedder_change(self) -> Report | None:
        """None when the home serves with the configured embedder; else what `reindex` would re-embed: the serving
        and configured embedders (their keys) and, per agent, its traces and its discussions' vector memories."""
        from engram.config.serving_embedder import embedder_key

        serving, configured = embedder_key(self.config.embedder), embedder_key(self.configured_embedder)
        if serving == configured:
            return None
        agents: dict[str, dict[str, int]] = {}
        for table, what in (("memory_traces", "traces"), ("vector_memories", "discussion_memories")):
            rows: list[Row]
            try:
                _, rows = self.sql(f"SELECT agent, count(*) FROM {table} GROUP BY agent")
            except QueryError:
                rows = []  # a home without that projection's table yet
            for agent, n in rows:
                agents.setdefault(agent, {"traces": 0, "discussion_memories": 0})[what] += int(n)
        return {"serving": serving, "configured": configured, "agents": dict(sorted(agents.items()))}

    def vector_memory_rows(self) -> list[_ReembedRow]:
        """The discussions' vector memories (current generations) as rows with what re-embedding needs."""
        try:
            _, rows = self.sql("SELECT agent, discussion_id, generation, memory_id, title, summary, key_phrases, "
                               "embedding_model "
                               "FROM vector_memories ORDER BY agent, discussion_id, ordinal")
        except QueryError:
            return []
        return [_ReembedRow(*r) for r in rows]

    def reindex(self, on_progress: Callable[[int, int, str], None] | None = None) -> Report:
        """Re-embed the home with the configured embedder and switch to it (see `engram.config.serving_embedder`).

        1. While the home keeps serving with its embedder, appends included: the configured embedder is prepared
           beside it; the discussions' vector memories get their new vectors recorded in the log
           (`VectorMemoryReembedded`, so replay needs no embedder; their stores take them at once, and until the
           switch a semantic search of such a store falls back to keyword search with its warning: two models'
           vectors are never compared); each shard builds a new generation of its projections from the log with the
           new embedder (`engram.shard.generation`): to the head as it was, then again to the head as it has moved,
           until it is within GENERATION_LAG events of it (at most GENERATION_ROUNDS rounds).
        2. The switch, with appends held (the routing gate): the policies stop; discussion memories made meanwhile get
           their new vectors too; the generations fold the last events and are marked ready; the new embedder is
           recorded (from here on the home serves with it, even after a crash); the shards reopen on their new
           generation; the policies that hold vectors drop their snapshots and refold; all start.

        A failure before the switch (an unreachable embedder, a forget that rewrote the log) discards the new
        generations: the old one goes on serving. `on_progress(done, total, unit)`: discussion memories, then events
        folded into the new generations."""
        from engram.config.serving_embedder import embedder_key, record_serving_embedder

        started = time.perf_counter()
        target = self.configured_embedder
        before = embedder_key(self.config.embedder)
        if before == embedder_key(target):
            return {"reindexed": False, "embedder": before, "discussion_memories": 0, "events": 0,
                    "seconds": round(time.perf_counter() - started, 3)}
        progress = on_progress or (lambda done, total, unit: None)
        self.wait_projections()
        name = self.prepare_vectors(target, [])
        shards = self.all_shards()
        committed = False
        try:
            memories = self.record_reembedded(name, target, progress)
            built = self.build_generations(shards, progress)
            with self.routing_gate.exclusive():
                held = time.perf_counter()
                self.stop_policies()
                try:
                    self.wait_projections()
                    memories += self.record_reembedded(name, target, held=True)
                    key = embedder_key(target)
                    finished = list(self.shard_calls("finish_generation", {s: (key,) for s in shards}).values())
                except BaseException:
                    self.start_policies()
                    raise
                record_serving_embedder(self.home.root, target)  # the switch
                committed = True
                self.switch_embedder(target)  # each shard reopens on its new generation
                self.forget_vector_state(shards)
                self.start_policies()
                held_s = time.perf_counter() - held
        except BaseException:
            if not committed:
                self.discard_generations(shards)
            raise
        return {"reindexed": True, "before": before, "embedder": embedder_key(target), "name": name,
                "discussion_memories": memories, "events": sum(f["events"] for f in finished),
                "rounds": built["rounds"], "held_events": sum(f["held_events"] for f in finished),
                "held_seconds": round(held_s, 3), "seconds": round(time.perf_counter() - started, 3)}

    def build_generations(self, shards: Sequence[int], progress: Callable[[int, int, str], None]) -> Report:
        """Step 1 of `reindex` for `shards`: their new generations built while appends go on (see there)."""
        from engram.shard.generation import GENERATION_STEP

        self.open_generations(shards)
        rounds = 0
        while True:
            rounds += 1
            heads = self.heads()
            goal = {s: heads[s] for s in shards}  # this round's fixed target: the heads as they are now
            at: dict[int, int] = {}
            pending = [s for s in shards if goal[s] > 0]
            if rounds == 1:
                progress(0, sum(goal.values()), "events")
            while pending:
                steps = self.shard_calls("advance_generation", {s: (GENERATION_STEP, goal[s]) for s in pending})
                at.update((s, state["position"]) for s, state in steps.items())
                progress(sum(at.values()), sum(goal.values()), "events")
                pending = [s for s in pending if at[s] < goal[s]]
            behind = sum(self.heads()[s] - at.get(s, 0) for s in shards)
            if behind <= GENERATION_LAG or rounds >= GENERATION_ROUNDS:
                return {"rounds": rounds, "behind": behind}

    def open_generations(self, shards: Sequence[int]) -> None:
        """Each of `shards` begins a new generation of its projections with the embedder `prepare_vectors` made."""
        raise NotImplementedError

    def discard_generations(self, shards: Sequence[int]) -> None:
        for s in shards:
            try:
                self.shard_call(s, "discard_generation")
            except Exception:  # a shard that is down discards it at its next start (it was never made ready)
                pass

    def shard_calls(self, method: str, args: dict[int, tuple[Any, ...]]) -> dict[int, Any]:
        """`shard_call(shard, method, *args[shard])` for each shard of `args` (at once where the runtime can)."""
        return {s: self.shard_call(s, method, *a) for s, a in args.items()}

    def record_reembedded(self, name: str, target: EmbedderConfig,
                          progress: Callable[[int, int, str], None] | None = None, *, held: bool = False) -> int:
        """Append the vector by `target` (named `name`) of each discussion vector memory that has another one.
        `held`: appends are held (the routing gate): written to the shards directly."""
        from engram.events.discussion import VectorMemoryReembedded
        from engram.events.envelope import NewEvent, Write
        from engram.memory.discussion.summarizer import embedding_text
        from engram.memory.discussion.vectors import encode_vector

        rows = [r for r in self.vector_memory_rows() if r.embedding_model != name]
        if progress is not None:
            progress(0, len(rows), "discussion memories")
        if not rows:
            return 0
        now = int(time.time() * 1_000_000)
        tag = hashlib.sha256(name.encode()).hexdigest()[:16]  # a retried reindex appends nothing twice
        for start in range(0, len(rows), REEMBED_BATCH):
            batch = rows[start : start + REEMBED_BATCH]
            vectors = self.target_vectors(target, [embedding_text(r) for r in batch])
            writes = [
                Write(r.discussion_id, r.agent, (NewEvent(
                    VectorMemoryReembedded(generation=r.generation, memory_id=r.memory_id, embedding=encode_vector(v),
                                           embedding_model=name),
                    now, f"reembed:{r.memory_id}:{tag}"),))
                for r, v in zip(batch, vectors)
            ]
            if held:
                by_shard: dict[int, list[Write]] = {}
                for w in writes:
                    by_shard.setdefault(self.shard_of(w.agent), []).append(w)
                for shard, part in sorted(by_shard.items()):
                    self.shard_call(shard, "append_many", part)
            else:
                self.append(writes)
            if progress is not None:
                progress(start + len(batch), len(rows), "discussion memories")
        self.wait_projections()
        return len(rows)

    def prepare_vectors(self, target: EmbedderConfig, texts: list[str],
                        on_progress: Callable[[int, int], None] | None = None) -> str:
        """Embed `texts` with `target` into the home's embedding cache; returns the target's embedder name."""
        raise NotImplementedError

    def target_vectors(self, target: EmbedderConfig, texts: list[str]) -> np.ndarray:
        """The vectors of `texts` by `target` (from the cache `prepare_vectors` filled)."""
        raise NotImplementedError

    def switch_embedder(self, target: EmbedderConfig) -> None:
        """Serve with `target` from now on: the shards and the embedder are reopened with it (policies stopped)."""
        raise NotImplementedError

    def forget_vector_state(self, shards: Sequence[int]) -> None:
        """Drop the snapshots of the policies that hold vectors (the cognitive ones): they refold the log with the
        new embedder. The others keep theirs."""
        from engram.policies.cognitive_base import CognitivePolicy
        from engram.policies.registry import GROUPS, policy_classes

        names = {cls.name for _, (_, specs) in GROUPS.items() for cls in policy_classes(specs)
                 if issubclass(cls, CognitivePolicy)}
        state = self.home.root / "state"
        for shard in shards:
            for name in names:
                for path in state.glob(f"{name}.shard-{shard:03d}.*"):
                    path.unlink()

    def forget_policy_state(self, shards: Sequence[int]) -> None:
        """Drop the policy snapshots of `shards`: their policies refold those shards' logs from the start."""
        state = self.home.root / "state"
        for shard in shards:
            for path in state.glob(f"*.shard-{shard:03d}.*"):
                path.unlink()

    # ------------------------------------------------------------------ shared behaviour

    def all_shards(self) -> list[int]:
        return list(range(self.config.shards))

    def wait_idle(self, timeout: float = 600.0, on_progress: Callable[[int, int, tuple[str, ...]], None] | None = None) -> bool:
        """Wait until every projection and policy has handled the whole log, and nothing new came
        (`on_progress(done, total, behind)`: see `engram.kernel.idle.wait_idle`).

        Policies append events (summaries, observations…), so the log may grow while waiting;
        idle means two consecutive looks with the same heads and every consumer at its head.
        """
        from engram.kernel.idle import wait_idle

        def look() -> tuple[list[int], list[dict[str, int]]]:
            self.settle()
            progress = self.progress()
            return [st["head"] for st in progress], [consumers(st) for st in progress]

        return wait_idle(look, timeout, on_progress, IDLE_POLL_S)

    def sync_settings(self, agent: str, ts_us: int) -> int:
        """Record the agent's settings files in the log when they changed since last recorded (event time
        `ts_us`). Returns the SettingsChanged events appended. The files are only re-read when their
        size or modification time changed, so the check costs two `stat`s on every request."""
        from engram.memory.settings import SettingsView, sync_writes
        from engram.kernel.ids import agent_stream

        cache: dict[str, tuple[tuple[int, int] | None, ...]] = self.__dict__.setdefault("_settings_seen", {})
        paths = (self.home.settings_path, self.home.agent_config_path(agent))
        signature = tuple((p.stat().st_mtime_ns, p.stat().st_size) if p.exists() else None for p in paths)
        if cache.get(agent) == signature:
            return 0
        view = SettingsView()
        for rec in self.read(agent, stream=agent_stream(agent), types=["SettingsChanged"], limit=None):
            view.apply(rec)
        writes = sync_writes(self.home, agent, view.recorded_hashes(agent), ts_us, self.config.llm)
        appended = sum(len(r.seqs) - r.duplicates for r in self.append(writes)) if writes else 0
        cache[agent] = signature
        return appended

    def settle(self) -> None:
        """Run pending work now (the in-process runtime, which has no background threads); a no-op
        where the work runs by itself."""


# `reindex`: discussion memories re-embedded and appended per step.
REEMBED_BATCH = 256
# `reindex` holds appends for the last catch-up of the new generations once they are at most this many events behind
# the heads; after GENERATION_ROUNDS rounds (appends coming faster than the new embedder folds them) it holds them
# anyway, for a longer last catch-up.
GENERATION_LAG = 1_000
GENERATION_ROUNDS = 5

# Positions closer than this are read as one range (one query) rather than one by one.
SEQ_RANGE_GAP = 256


def seq_ranges(seqs: Sequence[int], gap: int = SEQ_RANGE_GAP) -> list[tuple[int, int]]:
    """`seqs` as few (first, last) ranges: neighbours within `gap` share a range (one read instead of many)."""
    out: list[list[int]] = []
    for s in sorted(set(seqs)):
        if out and s - out[-1][1] <= gap:
            out[-1][1] = s
        else:
            out.append([s, s])
    return [(a, b) for a, b in out]


def merge_results(results: Sequence[QueryResult], max_rows: int | None) -> QueryResult:
    """Per-shard `QueryResult`s as one: rows concatenated (aggregates stay per shard), cut at `max_rows`."""
    from engram.sql import QueryResult

    rows = [row for r in results for row in r.rows]
    truncated = any(r.truncated for r in results) or (max_rows is not None and len(rows) > max_rows)
    return QueryResult(columns=results[0].columns if results else [],
                       rows=rows[:max_rows] if max_rows is not None else rows, truncated=truncated)


def consumers(status: Report) -> dict[str, int]:
    """Each projection's and policy's position in one shard's status."""
    return {**status["projections"], **status.get("consumers", {})}


class _ReembedRow:
    """A discussion vector memory, as re-embedding reads it (what `embedding_text` needs, and where it lives)."""

    __slots__ = ("agent", "discussion_id", "generation", "memory_id", "title", "summary", "key_phrases",
                 "embedding_model")

    def __init__(self, agent: str, discussion_id: str, generation: int, memory_id: str, title: str | None,
                 summary: str | None, key_phrases: Sequence[str] | None, embedding_model: str | None) -> None:
        self.agent, self.discussion_id, self.generation, self.memory_id = agent, discussion_id, generation, memory_id
        self.title, self.summary, self.key_phrases = title or "", summary or "", tuple(key_phrases or ())
        self.embedding_model = embedding_model

"""A shard: its event log and the projections folded from it, in one process.

DuckDB allows one writer per file, so the process that owns a shard's log also owns the
shard's projection database (attached to the same DuckDB instance, so SQL can join the log
with the projections). Projections are caught up by a background thread: appends never
wait for them, and `wait_projections(seq)` gives read-your-writes when a caller needs it.

This is a plain class; `engram.actors.shard` wraps it in a Ray actor.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Sequence

import duckdb
import msgspec

from engram.events.envelope import Appended, Recorded, Write
from engram.forgetting import RecordingEmbedder
from engram.gate import Gate, alone, shared
from engram.events.erasure import plan as plan_erasure, unfinished as unfinished_erasures
from engram.events.store import FORGET_MARKERS, EventStore, compact_database
from engram.projections.base import atomic_write
from engram.home import ProjectionPaths
from engram.projections.base import ProjectionContext
from engram.projections.compare import differences
from engram.projections.registry import build_projections
from engram.projections.runner import ProjectionRunner
from engram.sql import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, LiveShard, QueryResult, run_readonly

log = logging.getLogger(__name__)

# How long the projection thread lets appends accumulate before folding them: folding
# in batches keeps the checkpoint cost per event small under load.
PROJECTION_LINGER_S = 0.02
# While appends keep coming, projections are checkpointed (their files and rows written, with their
# positions) at most this often; at once when a reader waits for them (`wait_projections`), and when the
# log has been quiet for a moment (the fold loop's wait). Each checkpoint is a transaction per projection
# and rewrites every changed file (a discussion's whole vector store and memory file): after every fold it
# cost more than the folds themselves during a long ingest. Being caught up is no reason to checkpoint at
# once: while many policy actors append small batches, the folds catch up after nearly every one of them.
PROJECTION_CHECKPOINT_S = 0.25


class HomeNotWritable(OSError):
    """The home (or the folder of its log or projections) cannot be written: a read-only disk or mount."""


def check_writable(*folders: Path) -> None:
    """Raise HomeNotWritable, naming the folder, unless every existing folder of `folders` can be written."""
    for folder in folders:
        probe = folder
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        if not os.access(probe, os.W_OK):
            raise HomeNotWritable(f"{probe} is not writable (a read-only disk or mount?): engram records into its home; "
                                  f"reading it still works (engram sql, engram status)")


class ShardHost:
    def __init__(
        self,
        log_path: str | Path,
        projections_dir: str | Path,
        *,
        shard: int = 0,
        services: dict[str, Any] | None = None,
        max_batch_events: int = 20_000,
        max_payload_bytes: int = 1 << 20,
        background: bool = True,
        max_projection_lag: int = 0,
    ):
        self.shard = shard
        # Calls run on many threads at once; a forget, a rebuild or agents moving out reopen the shard's DuckDB
        # connections, and have it alone (a DuckDB connection refuses a second thread's call).
        self.gate = Gate()
        self.max_projection_lag = max_projection_lag  # 0: appends are never refused for a lagging fold
        self.log_path = Path(log_path)
        check_writable(self.log_path.parent, Path(projections_dir))
        self._store_options = dict(shard=shard, max_batch_events=max_batch_events, max_payload_bytes=max_payload_bytes)
        self.store = EventStore(self.log_path, **self._store_options)
        self.paths = ProjectionPaths(projections_dir)
        self.services = services or {}
        self.background = background
        self._proj_cond = threading.Condition()
        self._readers_waiting = 0  # callers of wait_projections: the fold loop checkpoints for them at once
        self._checkpointed_at = time.monotonic()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        # Events per type, counted through `_counted_through` and extended by the newer events only:
        # `status` is polled while memory catches up, and a GROUP BY over the whole log grew with it.
        self._counts_lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._counted_through = 0
        self.recovered: list[str] = []  # what the start found broken or unfinished, and did about it
        self._open_checked()
        self._finish_interrupted_work()

    def _open_checked(self) -> None:
        """Open the projections, checking their files first: damaged ones (truncated, corrupted) are detected
        here, and the shard's projections are rebuilt from the log (reported in `status`)."""
        from engram.discussion.regenerate import mark_deleted_discussions

        mark_deleted_discussions(self.paths.shard_db(self.shard), self.paths)  # before files are rendered again
        damage = damaged_outputs(self.paths, self._outputs(self.paths))
        if not damage:
            try:
                self._open_projections()
                return
            except Exception as exc:
                damage = [f"{type(exc).__name__}: {_first_line(exc)}"]
                self._discard_open_projections()
        log.warning("shard %s: damaged projections (%s); rebuilding them from the log", self.shard, "; ".join(damage))
        for old in self._outputs(self.paths):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        self._open_projections()
        self.recovered.append(f"projections rebuilt from the log at start: {'; '.join(damage)[:500]}")

    def _discard_open_projections(self) -> None:
        """Let go of whatever a failed `_open_projections` opened."""
        ctx = getattr(self, "_ctx", None)
        if ctx is not None:
            try:
                ctx.db.close()
            except Exception:
                pass
        try:
            self.store.detach("proj")
        except Exception:
            pass

    def _open_projections(self) -> None:
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self._ctx = None
        self.store.attach(self.paths.shard_db(self.shard), "proj")
        db = self.store.cursor()
        self._ctx = ProjectionContext(shard=self.shard, paths=self.paths, db=db, services=self.services)
        db.execute("USE proj")
        self.runner = ProjectionRunner(build_projections(self._ctx), self.store.read)
        self._stop = threading.Event()
        if self.background:
            self._thread = threading.Thread(target=self._fold_loop, name=f"projections-{self.shard}", daemon=True)
            self._thread.start()

    def _close_projections(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        try:
            self._catch_up()
        finally:
            self.runner.close()
            self._ctx.db.close()
            self.store.detach("proj")

    # --------------------------------------------------------------- the log

    @shared
    def append_many(self, writes: Sequence[Write]) -> list[Appended]:
        if self.max_projection_lag and self._thread is not None:
            lag = self.store.head() - self.runner.position
            if lag > self.max_projection_lag:
                from engram.flow import Backpressure

                raise Backpressure(f"shard {self.shard}'s projections are {lag} events behind its log "
                                   f"(limits.maxProjectionLagEvents {self.max_projection_lag}): retry shortly", 1.0)
        return self.store.append_many(writes)

    @shared
    def read(self, after: int = 0, **kwargs) -> list[Recorded]:
        return self.store.read(after, **kwargs)

    @shared
    def read_rows(self, after: int = 0, **kwargs) -> list[tuple]:
        return self.store.read_rows(after, **kwargs)

    def head(self) -> int:
        return self.store.head()

    def wait(self, seq: int, timeout: float | None = None) -> bool:
        return self.store.wait(seq, timeout)

    def wait_for(self, seq: int, types: Sequence[str] | None, timeout: float | None = None) -> tuple[bool, int]:
        return self.store.wait_for(seq, types, timeout)

    # --------------------------------------------------------------- projections

    def _fold_loop(self) -> None:
        while not self._stop.is_set():
            try:
                if not self.store.wait(self.runner.position + 1, timeout=0.2):
                    if self.runner.unsaved:  # caught up: what was folded becomes durable now
                        self._catch_up()
                    continue
                time.sleep(PROJECTION_LINGER_S)
                self._catch_up(checkpoint=None)
            except BaseException as exc:  # keep the log serving; report the failure in status
                log.exception("projection fold failed on shard %s", self.shard)
                self._error = exc
                self._stop.wait(1.0)

    @shared
    def catch_up(self, checkpoint: bool | None = True) -> int:
        """Fold everything appended so far (also used directly when there is no thread), and checkpoint;
        `checkpoint=None`: only when due (see PROJECTION_CHECKPOINT_S)."""
        return self._catch_up(checkpoint)

    def _catch_up(self, checkpoint: bool | None = True) -> int:
        """`catch_up` without the gate: what the fold thread runs (a change that has the shard alone stops
        and joins that thread, which must not wait for the gate meanwhile)."""
        with self._proj_cond:
            n = self.runner.catch_up(checkpoint=False)
            if checkpoint is None:
                checkpoint = (self._readers_waiting > 0
                              or time.monotonic() - self._checkpointed_at >= PROJECTION_CHECKPOINT_S)
            if checkpoint:
                self.runner.checkpoint()
                self._checkpointed_at = time.monotonic()
            self._error = None
            self._proj_cond.notify_all()
            return n

    def projection_position(self) -> int:
        return self.runner.position

    @shared
    def wait_projections(self, seq: int, timeout: float | None = 30.0) -> bool:
        """Block until every projection has folded `seq` (read-your-writes for projections)."""
        if self._thread is None:
            self._catch_up()
            return self.runner.durable_position >= seq
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._proj_cond:
            self._readers_waiting += 1
            try:
                while self.runner.durable_position < min(seq, self.store.head()):
                    if self.runner.position >= min(seq, self.store.head()):  # folded, not yet durable
                        self.runner.checkpoint()
                        self._checkpointed_at = time.monotonic()
                        self._proj_cond.notify_all()
                        continue
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._proj_cond.wait(min(0.1, remaining) if remaining is not None else 0.1)
            finally:
                self._readers_waiting -= 1
        return True

    # --------------------------------------------------------------- SQL and status

    @shared
    def sql(
        self,
        sql: str,
        params: Sequence | None = None,
        *,
        agents: Sequence[str] | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        max_rows: int | None = DEFAULT_MAX_ROWS,
    ) -> QueryResult:
        """Run one read-only statement over this shard's log and projections, confined (`engram.sql`):
        never on the writer's connection; with `agents`, over those agents' rows only."""
        return run_readonly(sql, self._sql_source(), params=params, agents=agents, timeout_s=timeout_s, max_rows=max_rows)

    def query(self, sql: str, params: Sequence | None = None) -> tuple[list[str], list[tuple]]:
        """`sql` without a row limit, as (column names, rows)."""
        result = self.sql(sql, params, max_rows=None)
        return result.columns, result.rows

    def _sql_source(self) -> LiveShard:
        catalog = self.store.query("SELECT current_database()")[1][0][0]
        return LiveShard(shard=self.shard, cursor=self.store.cursor, log_table=f'"{catalog}".main.events',
                         projection_catalog="proj", projections=self.paths)

    @shared
    def relations(self, names: list[str] | None, agents: Sequence[str] | None = None) -> dict:
        """The relations a query over every shard reads, from this shard (`engram.gathered_sql`); `agents`: only
        their rows."""
        from engram.gathered_sql import shard_relations

        return shard_relations(self.store.cursor, None if names is None else set(names), agents=agents)

    @shared
    def events_by_type(self) -> dict[str, int]:
        """How many events of each type the log holds (up to its head)."""
        with self._counts_lock:
            head = self.store.head()
            if head > self._counted_through:
                _, rows = self.store.query(
                    "SELECT type, count(*) FROM events WHERE seq > ? AND seq <= ? GROUP BY type", [self._counted_through, head])
                for type_, n in rows:
                    self._counts[type_] = self._counts.get(type_, 0) + n
                self._counted_through = head
            return dict(sorted(self._counts.items()))

    def _recount(self) -> None:
        """The log's past changed (a purge retyped events): count from the start at the next look."""
        with self._counts_lock:
            self._counts, self._counted_through = {}, 0

    def progress(self) -> dict:
        """What waiting for idle looks at, many times a second: the head and the projections' checkpointed
        positions, read from memory (`status` also queries the log and the projection database)."""
        return {"shard": self.shard, "head": self.store.head(), "projections": dict(self.runner.checkpointed)}

    @shared
    def status(self) -> dict:
        return {
            "shard": self.shard,
            "head": self.store.head(),
            "streams": len(self.store.streams()),
            "projections": dict(self.runner.checkpointed),
            "projection_lag": self.store.head() - self.runner.durable_position,
            "projection_error": None if self._error is None else repr(self._error),
            "projection_timings": self.runner.timings.report(),
            "events_by_type": self.events_by_type(),
            # Events a projection could not fold, left out of it (FoldFailed records; SQL: fold_failed).
            "fold_failed": self._fold_failures(),
            "unfinished_forgets": self.unfinished_forgets(),
            "recovered": list(self.recovered),
            "resident_agents": self.resident_agents(),
        }

    def resident_agents(self) -> int | None:
        """Agents whose cognitive memory the traces projection holds now (None: no traces projection)."""
        traces = next((p for p in self.runner.projections if p.name == "traces"), None)
        return None if traces is None else len(traces.memories)

    def _fold_failures(self) -> list[dict]:
        if not self.runner.any_failed:
            return []
        cur = self.store.cursor()
        try:
            cur.execute("USE proj")
            return [msgspec.to_builtins(f) for f in self.runner.failures(cur)]
        finally:
            cur.close()

    # --------------------------------------------------------------- replay

    @shared
    def replay_into(self, out_dir: str | Path, *, to_seq: int | None = None, until_us: int | None = None,
                    services: dict[str, Any] | None = None) -> dict:
        """Rebuild every projection of this shard from position 0 into `out_dir`. No LLM is called."""
        paths = ProjectionPaths(out_dir)
        paths.root.mkdir(parents=True, exist_ok=True)
        db = duckdb.connect(str(paths.shard_db(self.shard)))
        started = time.perf_counter()
        try:
            ctx = ProjectionContext(shard=self.shard, paths=paths, db=db, services=services or self.services)
            runner = ProjectionRunner(build_projections(ctx), self.store.read)
            try:
                events = runner.catch_up(to_seq=to_seq, until_us=until_us)
            finally:
                runner.close()
        finally:
            db.close()
        seconds = time.perf_counter() - started
        return {"shard": self.shard, "events": events, "seconds": round(seconds, 3), "out": str(paths.root)}

    @property
    def _rebuild_dir(self) -> Path:
        return self.paths.root.parent / f".{self.paths.root.name}.rebuild-{self.shard:03d}"

    @alone
    def rebuild(self, *, retain_cache: bool = False) -> dict:
        """Replay this shard's projections from scratch and swap them in for the live ones.

        The replay's directory stays until the swap is done: found at the next start, the rebuild is done
        again. `retain_cache`: afterwards, the embedding cache keeps only the vectors this replay used (after
        a forget: the vectors of forgotten texts go)."""
        tmp = self._rebuild_dir
        if tmp.exists():
            shutil.rmtree(tmp)
        recorder = RecordingEmbedder(self.services.get("embedder")) if retain_cache and self.services.get("embedder") else None
        services = dict(self.services, embedder=recorder) if recorder is not None else self.services
        report = self.replay_into(tmp, services=services)
        self._close_projections()
        try:
            for old in self._outputs(self.paths):
                shutil.rmtree(old) if old.is_dir() else old.unlink()
            for new in self._outputs(ProjectionPaths(tmp)):
                target = self.paths.root / new.relative_to(tmp)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(new, target)
            shutil.rmtree(tmp, ignore_errors=True)
        finally:
            self._open_projections()
        if recorder is not None:
            report["cache_entries_removed"] = recorder.retain()
        report["out"] = str(self.paths.root)
        return report

    # --------------------------------------------------------------- moving agents (re-sharding)

    @shared
    def export_agents(self, agents: Sequence[str], after: int = 0, limit: int = 50_000):
        """The log rows of `agents` after `after` (an Arrow table, every column), in seq order."""
        return self.store.export_agents(agents, after, limit)

    @shared
    def count_events(self, agents: Sequence[str]) -> int:
        _, rows = self.store.query("SELECT count(*) FROM events WHERE agent IN (SELECT unnest(?))", [list(agents)])
        return rows[0][0]

    @shared
    def import_rows(self, table) -> int:
        """Rows exported by the parent shard, appended at their own positions; the projections fold them."""
        n = self.store.import_rows(table)
        self._recount()
        return n

    @alone
    def remove_agents(self, agents: Sequence[str]) -> dict:
        """The agents moved to another shard: their events leave this log and the projections are rebuilt without
        them (their files now belong to the shard that holds them, so they are left in place)."""
        self.wait_projections(self.store.head(), timeout=None)
        removed = self.store.remove_agents(agents)
        self._recount()
        report = self.rebuild()
        return {"shard": self.shard, "agents": len(agents), "events_removed": removed, "head": self.store.head(),
                "rebuild": report}

    # --------------------------------------------------------------- export

    @shared
    def export_parquet(self, out_dir: str | Path) -> dict:
        """This shard's log and projection tables as Parquet under `out_dir` (`log/shard-NNN.parquet`,
        `projections/<table>/shard-NNN.parquet`), its agents' projection files copied beside them: a home that
        plain DuckDB reads with globs over every shard (`SELECT ... FROM '<out>/log/*.parquet'`)."""
        self.wait_projections(self.store.head(), timeout=None)
        out = Path(out_dir)
        name = f"shard-{self.shard:03d}.parquet"
        (out / "log").mkdir(parents=True, exist_ok=True)
        report = {"shard": self.shard, "events": 0, "tables": {}, "files": 0}
        cur = self.store.cursor()
        try:
            catalog = cur.execute("SELECT current_database()").fetchall()[0][0]
            report["events"] = cur.execute(f'SELECT count(*) FROM "{catalog}".main.events').fetchall()[0][0]
            cur.execute(f'COPY (SELECT * FROM "{catalog}".main.events ORDER BY seq) TO {_literal(out / "log" / name)} '
                        "(FORMAT parquet)")
            tables = [t for (t,) in cur.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = 'proj' ORDER BY table_name").fetchall()]
            for table in tables:
                (out / "projections" / table).mkdir(parents=True, exist_ok=True)
                report["tables"][table] = cur.execute(f'SELECT count(*) FROM proj.main."{table}"').fetchall()[0][0]
                cur.execute(f'COPY proj.main."{table}" TO {_literal(out / "projections" / table / name)} (FORMAT parquet)')
        finally:
            cur.close()
        agents = sorted({agent for _, agent in self.store.streams().values()})
        for agent in agents:
            src = self.paths.agent_dir(agent)
            if src.exists():
                dst = ProjectionPaths(out / "projections").agent_dir(agent)
                shutil.copytree(src, dst, dirs_exist_ok=True)
                report["files"] += sum(1 for p in dst.rglob("*") if p.is_file())
        return report

    # --------------------------------------------------------------- forgetting

    @shared
    def begin_forget(self, agent: str, discussion: str | None = None, *, reason: str = "") -> tuple[int, list[str]]:
        """Record that a discussion (or a whole agent) is forgotten: the marker, durable before anything is
        erased, so that a forget interrupted at any point is completed at the next start. Returns
        (marker seq, the streams it forgets)."""
        from engram.events.control import AgentForgotten, DiscussionForgotten
        from engram.settings import agent_stream

        owned = {s for s, (_, a) in self.store.streams().items() if a == agent}
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

    @alone
    def complete_forget(self, marker_seq: int, streams: list[str]) -> tuple[dict, list[str]]:
        """Erase what `begin_forget` recorded: the payloads in the log (and the log file rewritten, WAL
        included), every projection rebuilt from the erased log, and the embedding cache cut down to what
        the rebuilt projections use. Returns the report and the forgotten texts (in memory only: for
        checking other state, e.g. policy snapshots)."""
        atomic_write(self._journal, json.dumps({"marker_seq": marker_seq, "streams": streams}).encode())
        self.wait_projections(marker_seq)
        erasure = plan_erasure(self.store, streams, before_seq=marker_seq)
        erased = self.store.erase(erasure.seqs)
        self._recount()
        self._close_projections()
        self.store.close()
        compact_database(self.log_path)
        self.store = EventStore(self.log_path, **self._store_options)
        self._open_projections()
        self.rebuild(retain_cache=True)
        self._journal.unlink(missing_ok=True)
        report = {"forgotten": streams, "events_erased": erased, "marker_seq": marker_seq}
        return report, erasure.texts

    @alone
    def forget(self, agent: str, discussion: str | None = None, *, reason: str = "") -> dict:
        """Forget a discussion (or a whole agent) in this shard: record it, erase its content and what derives
        from it from the log file, and rebuild the projections so nothing of it is left in them either.
        (Policies hold state too: `engram.forgetting.forget` coordinates them with this.)"""
        marker_seq, streams = self.begin_forget(agent, discussion, reason=reason)
        report, _ = self.complete_forget(marker_seq, streams)
        report["forgotten"] = discussion or agent
        report["streams"] = streams
        return report

    @property
    def _journal(self) -> Path:
        return forget_journal(self.log_path)

    @shared
    def unfinished_forgets(self) -> list[dict]:
        """Forgets recorded but not (completely) erased: what `status` shows, and what a start completes."""
        counts = self.events_by_type()
        if not any(marker in counts for marker in FORGET_MARKERS) and not self._journal.exists():
            return []  # no forget was ever recorded (the counts are kept as the log grows): no query of the log
        return unfinished_forgets(self.store, self._journal)

    def _finish_interrupted_work(self) -> None:
        """At start: complete a forget or a rebuild that a crash interrupted (recorded in `recovered`)."""
        for item in self.unfinished_forgets():
            log.warning("completing an interrupted forget (marker %s)", item["marker_seq"])
            if item["streams"]:
                self.complete_forget(item["marker_seq"], item["streams"])
            else:
                self.rebuild(retain_cache=True)
                self._journal.unlink(missing_ok=True)
            self.recovered.append(f"completed an interrupted forget (marker seq {item['marker_seq']})")
        if self._rebuild_dir.exists():
            log.warning("completing an interrupted rebuild of shard %s", self.shard)
            self.rebuild()
            self.recovered.append("completed an interrupted rebuild of the projections")

    @alone
    def verify_replay(self) -> list[str]:
        """Replay into a scratch directory and compare with the live projections.

        Returns the differences (none means replay reproduces the live state exactly: files byte
        for byte, tables row for row). Live projections pause while they are compared.
        """
        scratch = Path(tempfile.mkdtemp(prefix=f"engram-verify-{self.shard:03d}-"))
        try:
            self.replay_into(scratch)
            self._close_projections()
            try:
                within = sorted(
                    {p.relative_to(self.paths.root) for p in self._outputs(self.paths)}
                    | {p.relative_to(scratch) for p in self._outputs(ProjectionPaths(scratch))}
                )
                return differences(self.paths.root, scratch, within)
            finally:
                self._open_projections()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _outputs(self, paths: ProjectionPaths) -> list[Path]:
        """What this shard's projections own inside `paths`: its database, positions and agent folders."""
        db = paths.shard_db(self.shard)
        found = [p for p in (db, db.with_name(db.name + ".wal")) if p.exists()]
        found += sorted((paths.root / "_positions").glob(f"*.shard-{self.shard:03d}.json"))
        agents = {agent for _, agent in self.store.streams().values()}
        found += [paths.agent_dir(a) for a in sorted(agents) if paths.agent_dir(a).exists()]
        return found

    @alone
    def close(self) -> None:
        try:
            self._close_projections()
        finally:
            self.store.close()


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def forget_journal(log_path: Path) -> Path:
    """Written while a forget erases (ids only): its presence at start means it did not finish."""
    return log_path.with_name(log_path.stem + ".forgetting.json")


def unfinished_forgets(store: EventStore, journal: Path) -> list[dict]:
    """Forgets whose erasure did not finish: markers with content left before them, or a journal left behind."""
    pending = [{"marker_seq": seq, "streams": streams} for seq, streams in unfinished_erasures(store)]
    if journal.exists() and not pending:
        try:
            pending = [json.loads(journal.read_text())]
        except (OSError, ValueError):
            pending = [{"marker_seq": store.head(), "streams": []}]
    return pending


def unfinished_forgets_in(log_path: Path) -> list[dict]:
    """`unfinished_forgets` of a shard whose files no process holds (`engram status` without a server)."""
    store = EventStore(log_path, read_only=True)
    try:
        return unfinished_forgets(store, forget_journal(log_path))
    finally:
        store.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""


def damaged_outputs(paths: ProjectionPaths, outputs: list[Path]) -> list[str]:
    """Projection files that do not read back (a JSON or JSON Lines file that does not parse, a DuckDB file that
    does not open, an HNSW index file that is not whole): what a crash or a disk error can leave. Checked at start, before anything folds into them."""
    found = []
    files = [f for top in outputs for f in ([top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else [])]
    for f in files:
        if not f.is_file() or f.name.startswith("."):
            continue
        try:
            if f.suffix == ".json":
                json.loads(f.read_bytes())
            elif f.suffix == ".jsonl":
                for line in f.read_bytes().splitlines():
                    if line.strip():
                        json.loads(line)
            elif f.suffix == ".hnsw" and f.with_name(f.name + ".json").exists():
                # An agent's trace index: read back only when its agent's events come (the traces projection loads
                # nothing at start), so a damaged one is found here, against the ids its metadata lists.
                from engram.search.hnsw import HnswIndex

                HnswIndex.check_file(f, len(json.loads(f.with_name(f.name + ".json").read_bytes())["ids"]))
            elif f.suffix == ".db":
                con = duckdb.connect(str(f), read_only=True)
                try:
                    for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
                        con.execute(f'SELECT count(*) FROM "{table}"').fetchall()
                finally:
                    con.close()
        except Exception as exc:
            found.append(f"{f.relative_to(paths.root)}: {type(exc).__name__}: {_first_line(exc)}")
    return found

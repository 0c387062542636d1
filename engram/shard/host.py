"""A shard: its event log and the projections folded from it, in one process.

DuckDB allows one writer per file, so the process that owns a shard's log also owns the
shard's projection database (attached to the same DuckDB instance, so SQL can join the log
with the projections). Projections are caught up by a background thread: appends never
wait for them, and `wait_projections(seq)` gives read-your-writes when a caller needs it.

This is a plain class; `engram.actors.shard` wraps it in a Ray actor.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from engram.config.home import ProjectionPaths
from engram.events.envelope import Appended, Recorded, Write
from engram.events.store import EventStore
from engram.kernel.flow import Backpressure
from engram.kernel.gate import Gate, alone, shared
from engram.projections.base import ProjectionContext
from engram.projections.registry import build_projections
from engram.projections.runner import ProjectionRunner
from engram.shard.export import ShardExport
from engram.shard.forget import ShardForget
from engram.shard.generation import ShardGenerations
from engram.shard.moving import ShardMoves
from engram.shard.queries import ShardQueries
from engram.shard.repair import ShardRepair
from engram.sql import OwnSessions

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
# A second (issue 27): under a sustained recall load (each recall's TraceRetrieved reinforces traces and moves working
# memory) a checkpoint's fixed part (a statement per table written, the position rows, the commit, the working memory
# file) was most of its cost, paid four times a second; at 1 s the shard's fold thread spends about half as much per
# recall. Nothing that needs the rows waits longer: a read `after` a position waits for them (`wait_projections`
# checkpoints at once), and a log quiet for 0.2 s is checkpointed at once; only rows read without a position (`engram
# sql`, a listing) may be up to this much older than the log under a sustained load.
PROJECTION_CHECKPOINT_S = 1.0


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


class ShardHost(ShardQueries, ShardRepair, ShardMoves, ShardExport, ShardForget, ShardGenerations):
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
    ) -> None:
        self.shard = shard
        # Calls run on many threads at once; a forget, a rebuild or agents moving out reopen the shard's DuckDB
        # connections, and have it alone (a DuckDB connection refuses a second thread's call).
        self.gate = Gate()
        self.max_projection_lag = max_projection_lag  # 0: appends are never refused for a lagging fold
        self.log_path = Path(log_path)
        check_writable(self.log_path.parent, Path(projections_dir))
        self._max_batch_events, self._max_payload_bytes = max_batch_events, max_payload_bytes
        self.store = self._open_store()
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
        self.own_sessions = OwnSessions()
        self._adopt_generation()  # a new generation `engram reindex` made ready, before the projections open
        self._open_checked()
        self._finish_interrupted_work()

    def _open_store(self) -> EventStore:
        """The shard's log, opened (at start, and again after a forget has rewritten its file)."""
        return EventStore(self.log_path, shard=self.shard, max_batch_events=self._max_batch_events,
                          max_payload_bytes=self._max_payload_bytes)

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
            if self._ctx is not None:
                self._ctx.db.close()
            self.store.detach("proj")

    # --------------------------------------------------------------- the log

    @shared
    def append_many(self, writes: Sequence[Write]) -> list[Appended]:
        if self.max_projection_lag and self._thread is not None:
            lag = self.store.head() - self.runner.position
            if lag > self.max_projection_lag:
                raise Backpressure(f"shard {self.shard}'s projections are {lag} events behind its log "
                                   f"(limits.maxProjectionLagEvents {self.max_projection_lag}): retry shortly", 1.0)
        return self.store.append_many(writes)

    @shared
    def read(self, after: int = 0, **kwargs: Any) -> list[Recorded]:
        return self.store.read(after, **kwargs)

    @shared
    def read_rows(self, after: int = 0, **kwargs: Any) -> list[tuple[Any, ...]]:
        return self.store.read_rows(after, **kwargs)

    def read_page(self, after: int, limit: int, to_seq: int | None = None) -> list[tuple[Any, ...]]:
        """`read_rows` with positional arguments (what `Runtime.shard_call` passes): the `/v1/events` feed's read."""
        return self.read_rows(after, limit=limit, to_seq=to_seq)

    def head(self) -> int:
        return self.store.head()

    def wait(self, seq: int, timeout: float | None = None) -> bool:
        return self.store.wait(seq, timeout)

    def wait_for(self, seq: int, types: Sequence[str] | None, timeout: float | None = None,
                 linger: float = 0.0, prompt: Sequence[str] | None = None) -> tuple[bool, int]:
        return self.store.wait_for(seq, types, timeout, linger, prompt)

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

    # --------------------------------------------------------------- replay

    # --------------------------------------------------------------- export

    # --------------------------------------------------------------- forgetting

    @alone
    def close(self) -> None:
        self._close_generation()
        try:
            self._close_projections()
        finally:
            self.own_sessions.close()
            self.store.close()



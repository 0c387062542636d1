"""What a projection is: a pure fold of events into a read model that can be rebuilt.

A projection applies events in seq order and records the position it has applied up to
*with* its state, so a restart resumes exactly once:

- `TableProjection`: rows in the shard's projection database; rows and position are
  written in one transaction.
- `FileProjection`: files under the projections directory, written atomically; the
  position is written after them, and each file carries the seq it reflects so that
  re-applying an event after a crash changes nothing.

A projection never reads the wall clock and never calls an LLM; everything it needs is in
the events (and, for embeddings, in the content-addressed cache).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Sequence

import duckdb

from engram.config.home import ProjectionPaths
from engram.events.envelope import Recorded
from engram.kernel.files import atomic_write


@dataclass
class ProjectionContext:
    """What a projection is given by whoever hosts it (the live runner or replay)."""

    shard: int
    paths: ProjectionPaths
    db: duckdb.DuckDBPyConnection  # the shard's projection database (one writer: the host)
    services: dict[str, Any] = field(default_factory=dict)  # e.g. "embedder"


class Projection(ABC):
    name: ClassVar[str]
    # Event types this projection reads; None means all. The runner skips the rest.
    interests: ClassVar[frozenset[str] | None] = None

    def __init__(self, ctx: ProjectionContext):
        self.ctx = ctx
        self.position = 0

    def wants(self, rec: Recorded) -> bool:
        """Whether this projection folds `rec`: decided by its event type alone (`to_fold` asks once per type)."""
        if self.interests is None:
            return rec.type != "Unreadable"  # quarantined by the runner, never folded
        return rec.type in self.interests

    def to_fold(self, batch: list[Recorded]) -> list[Recorded]:
        """The records of `batch` this projection folds: after its position, of a type it `wants`. Asked once per
        event class of the batch, not per record: every projection sees every event of a replay, and asking
        each record's type (a property over its event's class) was a sizeable part of a replay's fold."""
        position, out = self.position, []
        decided: dict[type, bool] = {}
        for rec in batch:
            if rec.seq > position:
                cls = type(rec.event)
                want = decided.get(cls)
                if want is None:
                    want = decided[cls] = self.wants(rec)
                if want:
                    out.append(rec)
        return out

    @abstractmethod
    def apply(self, rec: Recorded) -> None:
        """Fold one event into the state (only called for seq > position)."""

    def apply_batch(self, batch: list[Recorded]) -> None:
        """Fold a batch; override to batch expensive work such as embedding. A batch without an event this projection
        `wants` only moves its position (the runner does that without calling it)."""
        for rec in self.to_fold(batch):
            self.apply(rec)
        if batch:
            self.position = max(self.position, batch[-1].seq)

    def apply_in_runs(self, batch: list[Recorded], kind: type, fold_run: Callable[[list[Recorded]], None]) -> None:
        """`apply_batch` for a projection that folds runs of `kind` events (a log's messages, mostly) at once: each
        run of consecutive such records goes to `fold_run`, every other record to `apply`, in log order."""
        run: list[Recorded] = []
        for rec in self.to_fold(batch):
            if isinstance(rec.event, kind):
                run.append(rec)
                continue
            if run:
                fold_run(run)
                run = []
            self.apply(rec)
        if run:
            fold_run(run)
        if batch:
            self.position = max(self.position, batch[-1].seq)

    @abstractmethod
    def checkpoint(self) -> None:
        """Persist state and position together."""

    def close(self) -> None:
        pass


POSITIONS_DDL = "CREATE TABLE IF NOT EXISTS projection_positions (projection VARCHAR PRIMARY KEY, position BIGINT NOT NULL)"
VERSIONS_DDL = "CREATE TABLE IF NOT EXISTS projection_versions (projection VARCHAR PRIMARY KEY, version INTEGER NOT NULL)"


class TableProjection(Projection):
    """A projection into tables of the shard's projection database.

    Subclasses create their tables in `create()`, keep changes in memory in `apply`, and write
    them in `flush(con)`; the position is written in the same transaction.

    `version` is the shape of the tables: a projection whose tables were written by another version
    (an upgrade changed a column) drops its `tables` and folds the log again from the start, since
    a projection is only ever a fold of the log.
    """

    version: ClassVar[int] = 1
    tables: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx: ProjectionContext):
        super().__init__(ctx)
        db = ctx.db
        db.execute(POSITIONS_DDL)
        db.execute(VERSIONS_DDL)
        row = db.execute("SELECT position FROM projection_positions WHERE projection = ?", [self.name]).fetchone()
        stored = db.execute("SELECT version FROM projection_versions WHERE projection = ?", [self.name]).fetchone()
        if row is not None and (stored[0] if stored else 1) != self.version:
            for table in self.tables:
                db.execute(f"DROP TABLE IF EXISTS {table}")
            db.execute("DELETE FROM projection_positions WHERE projection = ?", [self.name])
            row = None
        db.execute("INSERT OR REPLACE INTO projection_versions VALUES (?, ?)", [self.name, self.version])
        self.create(db)
        self.position = row[0] if row else 0
        self.load(db)

    @abstractmethod
    def create(self, db: duckdb.DuckDBPyConnection) -> None: ...

    def load(self, db: duckdb.DuckDBPyConnection) -> None:
        """Restore in-memory state from the tables (after a restart)."""

    @abstractmethod
    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        """Write pending changes (inside the checkpoint's transaction)."""

    def checkpoint(self) -> None:
        write_together([self])

    def written(self) -> None:
        """Called once the checkpoint's transaction holding this projection's rows and position has committed."""


def write_together(projections: Sequence[TableProjection],
                   measure: Callable[[str], AbstractContextManager[Any]] | None = None) -> None:
    """Checkpoint `projections` (all on one connection) in ONE transaction: each one's pending rows, then every
    position in one statement, one commit. A DuckDB commit that wrote something costs some 3-5 ms of CPU; one per
    projection made the seven of them the larger part of a live shard's checkpoint (issue 27). On an error nothing
    is written (the transaction rolls back) and the error is raised: whatever pending changes the flushes took
    are lost with it, so the caller must reopen the projections from their last checkpoint (the runner does).
    `measure(name)`: a context timing each projection's flush."""
    if not projections:
        return
    db = projections[0].ctx.db
    db.execute("BEGIN TRANSACTION")
    try:
        for proj in projections:
            with measure(proj.name) if measure is not None else nullcontext():
                proj.flush(db)
            if hasattr(db, "complete"):  # DuckDB >= 2: a result left unread (a `fetchone`) refuses the next
                db.complete()            # projection's `register` (an Arrow insert); a commit used to end it
        rows = ", ".join("(?, ?)" for _ in projections)
        db.execute(f"INSERT OR REPLACE INTO projection_positions VALUES {rows}",
                   [v for proj in projections for v in (proj.name, proj.position)])
        db.execute("COMMIT")
    except Exception:
        db.execute("ROLLBACK")
        raise
    for proj in projections:
        proj.written()


class FileProjection(Projection):
    """A projection into files; subclasses write their dirty files in `write_files()`."""

    def __init__(self, ctx: ProjectionContext):
        super().__init__(ctx)
        self._position_path = ctx.paths.position_file(self.name, ctx.shard)
        if self._position_path.exists():
            self.position = json.loads(self._position_path.read_text())["position"]
        self.load()

    def load(self) -> None:
        """Restore in-memory state from the files (after a restart)."""

    @abstractmethod
    def write_files(self) -> None: ...

    def checkpoint(self) -> None:
        self.write_files()
        atomic_write(self._position_path, json.dumps({"position": self.position}).encode())


def jsonl(records: Iterable[dict]) -> bytes:
    """Canonical JSON Lines: sorted keys, no spaces, UTF-8; identical input gives identical bytes."""
    return b"".join(
        json.dumps(r, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode() + b"\n" for r in records
    )

"""Catching projections up with the log, in batches, from the lowest position among them.

A fold that fails on one event must not halt the shard: the runner finds the event, folds
everything before it, and quarantines it for that projection (a `FoldFailed` record: the
`fold_failed` table of the projection database, shown by `engram status`). An event that does
not even decode (`Unreadable`) is quarantined for every projection. A replay quarantines the
same events the same way, so live and replayed projections still agree.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator, Sequence

import msgspec

from engram.events.control import Unreadable
from engram.events.envelope import Recorded
from engram.kernel.collector import collector_paused
from engram.kernel.timing import StageTimings
from engram.projections.base import Projection, TableProjection, write_together

log = logging.getLogger(__name__)

ALL_PROJECTIONS = "*"  # the projection name of a quarantine that applies to every projection


class FoldFailed(msgspec.Struct, frozen=True):
    """An event a projection could not fold, left out of it (the projection moved past it)."""

    seq: int
    projection: str
    type: str
    error: str


FAILURES_DDL = (
    "CREATE TABLE IF NOT EXISTS fold_failed (seq BIGINT NOT NULL, projection VARCHAR NOT NULL, type VARCHAR NOT NULL, "
    "error VARCHAR NOT NULL, PRIMARY KEY (seq, projection))"
)


def _count(row: tuple[Any, ...] | None) -> int:
    """A `SELECT count(*)` row's count."""
    return int(row[0]) if row is not None else 0


class ProjectionRunner:
    def __init__(self, projections: Sequence[Projection], read: Callable[..., list[Recorded]], *, batch: int = 20_000):
        self.projections = list(projections)
        self._read = read
        self.batch = batch
        # Positions as of the last checkpoint: what readers of the outputs can rely on (a
        # projection's `position` moves while it folds, before its files or rows are written).
        self.checkpointed: dict[str, int] = {p.name: p.position for p in self.projections}
        self._db = self.projections[0].ctx.db if self.projections else None
        if self._db is not None:
            self._db.execute(FAILURES_DDL)
        # Whether `fold_failed` holds a record: status, asked often, reads the table only then.
        self.any_failed = self._db is not None and _count(self._db.execute("SELECT count(*) FROM fold_failed").fetchone()) > 0
        # Per projection: fold and checkpoint seconds, events folded; "(log)": reading the log.
        self.timings = StageTimings()

    @property
    def position(self) -> int:
        return min((p.position for p in self.projections), default=0)

    def catch_up(
        self, *, to_seq: int | None = None, until_us: int | None = None, checkpoint_every: int = 200_000,
        checkpoint: bool = True,
    ) -> int:
        """Apply every event after the lowest position (up to `to_seq`, and with ts <= `until_us`).

        Returns the number of events read. State and positions are checkpointed every
        `checkpoint_every` events, so a long replay can be interrupted and resumed, and at the end
        unless `checkpoint` is False (the live host then checkpoints when it is due).
        """
        after = self.position
        read = since_checkpoint = 0
        while True:
            with collector_paused():
                with self.timings.measure("(log)", "read"):
                    chunk = self._next_chunk(after, to_seq, until_us)
                if not chunk:
                    break
                self._fold_chunk(chunk)
                after = chunk[-1].seq
                read += len(chunk)
                since_checkpoint += len(chunk)
                del chunk  # freed now, while the collector is off, not after the checkpoint
            if since_checkpoint >= checkpoint_every:
                self.checkpoint()
                since_checkpoint = 0
        if checkpoint:
            self.checkpoint()
        return read

    def _fold_chunk(self, chunk: list[Recorded]) -> None:
        self.timings.add("(log)", "events", len(chunk))
        self._quarantine_unreadable(chunk)
        # One record of each event class of the chunk: a projection that wants none of them has nothing to fold, and
        # only moves past the chunk (most projections fold a few types; most of a log is messages).
        kinds = list({type(r.event): r for r in chunk}.values())
        for i, proj in enumerate(self.projections):
            if not any(proj.wants(r) for r in kinds):
                proj.position = max(proj.position, chunk[-1].seq)
                continue
            todo = chunk if chunk[0].seq > proj.position else [r for r in chunk if r.seq > proj.position]
            if todo:
                with self.timings.measure(proj.name, "fold"):
                    self._fold(i, todo)
                self.timings.add(proj.name, "events", len(todo))

    def _next_chunk(self, after: int, to_seq: int | None, until_us: int | None) -> list[Recorded]:
        """The next events after `after` (at most `batch` of them), read as a window of positions: `seq > after AND
        seq <= after + batch`. The log's query sorts what it selects, and asked for the first `batch` events after
        `after` it sorted every event after `after` to keep `batch` of them: a whole replay was quadratic in the log's
        length (a 1M-event replay spent 15 s of 21 reading). A window selects only what it returns (DuckDB skips the
        row groups outside it). A window with nothing in it is a gap of `batch` positions or more (a forget erased
        them), events left out by `until_us`, or the end of the log: one read as before finds the next event, if any."""
        end = after + self.batch if to_seq is None else min(to_seq, after + self.batch)
        if end > after:
            chunk = self._read(after, limit=self.batch, to_seq=end, until_us=until_us)
            if chunk or end == to_seq:
                return chunk
        return self._read(after, limit=self.batch, to_seq=to_seq, until_us=until_us)

    # ------------------------------------------------------------------ quarantine

    def _fold(self, i: int, todo: list[Recorded]) -> None:
        try:
            self.projections[i].apply_batch(todo)
        except Exception as exc:
            log.warning("projection %s failed on events %s..%s (%s); looking for the event at fault",
                        self.projections[i].name, todo[0].seq, todo[-1].seq, type(exc).__name__)
            self._isolate(i, todo[-1].seq)

    def _isolate(self, i: int, last: int) -> None:
        """Fold projection `i` up to `last` from its last checkpoint, quarantining each event it cannot take.

        The failed attempt may have changed the state half-way, so each round starts from the checkpoint
        again: the events before the culprit are folded, the culprit is skipped and recorded, and the skip
        is checkpointed so that a restart does not fold it again."""
        while True:
            proj = self._reopen(i)
            pending = [r for r in self._read(proj.position, limit=None, to_seq=last) if proj.wants(r)]
            bad, error = self._first_failure(proj, pending, checkpoint=False)
            if bad is None:
                try:
                    proj.position = max(proj.position, last)
                    proj.checkpoint()
                    self.checkpointed[proj.name] = proj.position
                    return
                except Exception:  # the fold took every event but cannot write them: find the one that breaks the write
                    proj = self._reopen(i)
                    bad, error = self._first_failure(proj, pending, checkpoint=True)
                    if bad is None:
                        raise
            proj = self._reopen(i)
            before = [r for r in pending if r.seq < bad.seq]
            if before:
                proj.apply_batch(before)
            self._record(FoldFailed(bad.seq, proj.name, bad.type, error))
            proj.position = bad.seq
            proj.checkpoint()
            self.checkpointed[proj.name] = proj.position
            if bad.seq >= last:
                return

    @staticmethod
    def _first_failure(proj: Projection, pending: list[Recorded], *, checkpoint: bool) -> tuple[Recorded | None, str]:
        """The first event of `pending` that `proj` cannot fold (or, with `checkpoint`, cannot write)."""
        for rec in pending:
            try:
                proj.apply_batch([rec])
                if checkpoint:
                    proj.checkpoint()
            except Exception as exc:
                return rec, f"{type(exc).__name__}: {exc}"[:500]
        return None, ""

    def _reopen(self, i: int) -> Projection:
        """A fresh instance of projection `i`, restored from its last checkpoint."""
        old = self.projections[i]
        old.close()
        fresh = type(old)(old.ctx)
        self.projections[i] = fresh
        return fresh

    def _quarantine_unreadable(self, chunk: list[Recorded]) -> None:
        for rec in chunk:
            if isinstance(rec.event, Unreadable) and rec.seq > self.position:
                self._record(FoldFailed(rec.seq, ALL_PROJECTIONS, rec.event.original_type, rec.event.error))

    def _record(self, failure: FoldFailed) -> None:
        log.error("quarantined event %s (%s) for projection %s: %s", failure.seq, failure.type, failure.projection,
                  failure.error)
        if self._db is not None:
            self._db.execute("INSERT OR REPLACE INTO fold_failed VALUES (?, ?, ?, ?)",
                             [failure.seq, failure.projection, failure.type, failure.error])
            self.any_failed = True

    def failures(self, con=None) -> list[FoldFailed]:
        """The quarantined events. `con`: a connection of the reader's own (the folding thread uses the runner's)."""
        con = con or self._db
        if con is None:
            return []
        rows = con.execute("SELECT seq, projection, type, error FROM fold_failed ORDER BY seq, projection").fetchall()
        return [FoldFailed(*row) for row in rows]

    # ------------------------------------------------------------------ positions

    @property
    def unsaved(self) -> bool:
        """Whether some projection has folded events its last checkpoint does not hold."""
        return any(self.checkpointed.get(p.name) != p.position for p in self.projections)

    @property
    def durable_position(self) -> int:
        return min(self.checkpointed.values(), default=0)

    def checkpoint(self) -> None:
        """Write every projection's state and position. The table projections of the shard's database are written in
        one transaction (`write_together`: one commit, not one per projection); when it fails, nothing of it was
        written and the pending changes its flushes took are gone, so each of them is folded again from its last
        checkpoint, alone, which finds and quarantines the event at fault (`_isolate`). The others (none in the
        registry today) write on their own."""
        tables = {i: p for i, p in enumerate(self.projections) if isinstance(p, TableProjection) and p.ctx.db is self._db}
        together = list(tables)
        if together:
            try:
                write_together(list(tables.values()), lambda name: self.timings.measure(name, "checkpoint"))
            except Exception as exc:
                log.warning("projections could not write their state (%s: %s); looking for the event at fault",
                            type(exc).__name__, exc)
                for i in together:
                    self._isolate(i, self.projections[i].position)
        for i, proj in enumerate(self.projections):
            if i in together:
                continue
            try:
                with self.timings.measure(proj.name, "checkpoint"):
                    proj.checkpoint()
            except Exception as exc:
                log.warning("projection %s could not write its state (%s); looking for the event at fault",
                            proj.name, type(exc).__name__)
                self._isolate(i, proj.position)
        self.checkpointed = {p.name: p.position for p in self.projections}

    def close(self) -> None:
        for proj in self.projections:
            proj.close()

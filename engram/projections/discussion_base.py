"""What the discussion-memory projections share: per-discussion generations, forgetting, and
rendering files from tables.

Each projection keeps its rows in the shard's projection database (so `engram sql` can read
them across discussions) and renders the files of every discussion it changed from those
rows, inside the checkpoint's transaction and before it commits. A crash between the two
leaves files that are ahead of the recorded position; re-applying the same events renders the
same bytes. Because a file is always rendered whole from the rows, a file a user deleted comes
back the next time its discussion changes, when the shard starts, or with
`engram replay --discussion ID`.

Generations: `GenerationStarted` (regeneration) supersedes a discussion's memories: its rows
and files are dropped and the new generation starts without a store (consolidation mode).
Events of an older generation that arrive afterwards are ignored. The old events stay in the log.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import duckdb

from engram.events.control import AgentForgotten, DiscussionForgotten, GenerationStarted
from engram.events.discussion import MemoryFileCreated
from engram.events.envelope import Recorded
from engram.projections.base import TableProjection


@dataclass
class DiscussionMeta:
    agent: str
    generation: int = 0
    created: bool = False  # the store of this projection exists (MemoryFileCreated for it)
    count: int = 0  # memories of the current generation
    last_seq: int = 0  # seq of the last event folded for this discussion


class PerDiscussionProjection(TableProjection):
    """A table projection whose rows belong to discussions and render into per-discussion files."""

    store: ClassVar[str]  # the MemoryFileCreated store this projection renders
    meta_table: ClassVar[str]
    rows_table: ClassVar[str]
    control_types: ClassVar[frozenset[str]] = frozenset(
        {"GenerationStarted", "DiscussionForgotten", "AgentForgotten", "MemoryFileCreated"}
    )

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(
            f"""CREATE TABLE IF NOT EXISTS {self.meta_table} (
                discussion_id VARCHAR PRIMARY KEY, agent VARCHAR NOT NULL, generation INTEGER NOT NULL,
                created BOOLEAN NOT NULL, memory_count INTEGER NOT NULL, last_seq BIGINT NOT NULL)"""
        )
        self.create_tables(db)
        self.meta: dict[str, DiscussionMeta] = {}
        self._dirty: set[str] = set()  # discussions whose files must be rendered
        self._reset: set[str] = set()  # discussions whose stored rows must be dropped first
        self._forgotten: dict[str, str] = {}  # discussion -> agent: files and rows go away

    @abstractmethod
    def create_tables(self, db: duckdb.DuckDBPyConnection) -> None: ...

    def load(self, db: duckdb.DuckDBPyConnection) -> None:
        for d, agent, gen, created, count, last in db.execute(
            f"SELECT discussion_id, agent, generation, created, memory_count, last_seq FROM {self.meta_table}"
        ).fetchall():
            self.meta[d] = DiscussionMeta(agent, gen, created, count, last)
            if any(not p.exists() for p in self.expected_files(d, self.meta[d])):
                self.render(db, d, self.meta[d])  # a file was deleted while we were down: render it again

    # ------------------------------------------------------------------ folding

    def apply(self, rec: Recorded) -> None:
        ev = rec.event
        if isinstance(ev, AgentForgotten):
            for d in [d for d, m in self.meta.items() if m.agent == ev.agent_id]:
                self._forget(d)
            return
        if isinstance(ev, DiscussionForgotten):
            self._forget(ev.discussion_id)
            return
        d = rec.stream
        if d.startswith("agent:"):
            return
        meta = self.meta.get(d)
        if meta is None:
            meta = self.meta[d] = DiscussionMeta(rec.agent)
            self._forgotten.pop(d, None)
        if isinstance(ev, GenerationStarted):
            if ev.generation > meta.generation:
                meta.generation, meta.created, meta.count = ev.generation, False, 0
                self._reset.add(d)
                self.on_reset(d)
        elif getattr(ev, "generation", meta.generation) < meta.generation:
            return  # a decision of a superseded generation that reached the log late
        elif isinstance(ev, MemoryFileCreated):
            if ev.store != self.store or meta.created:
                return
            meta.created = True
        elif not self.apply_memory(rec, meta):
            return
        meta.last_seq = rec.seq
        self._dirty.add(d)

    @abstractmethod
    def apply_memory(self, rec: Recorded, meta: DiscussionMeta) -> bool:
        """Fold one memory event of the current generation; False if it changed nothing."""

    def on_reset(self, discussion: str) -> None:
        """Drop buffered rows of `discussion` (a new generation started)."""

    def _forget(self, discussion: str) -> None:
        meta = self.meta.pop(discussion, None)
        if meta is not None:
            self._forgotten[discussion] = meta.agent
            self._reset.add(discussion)
            self._dirty.discard(discussion)
            self.on_reset(discussion)

    # ------------------------------------------------------------------ writing

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        gone = sorted(self._reset)
        if gone:
            for table in (self.rows_table, *self.extra_tables()):
                db.execute(f"DELETE FROM {table} WHERE discussion_id IN (SELECT unnest(?))", [gone])
        self.insert_rows(db)
        changed = sorted(self._dirty | set(self._forgotten))
        if changed:
            db.execute(f"DELETE FROM {self.meta_table} WHERE discussion_id IN (SELECT unnest(?))", [changed])
            rows = [(d, m.agent, m.generation, m.created, m.count, m.last_seq) for d, m in
                    ((d, self.meta[d]) for d in sorted(self._dirty) if d in self.meta)]
            if rows:
                db.executemany(f"INSERT INTO {self.meta_table} VALUES (?, ?, ?, ?, ?, ?)", rows)
        for d, agent in sorted(self._forgotten.items()):
            for path in self.files_of(agent, d):
                path.unlink(missing_ok=True)
        for d in sorted(self._dirty):
            if d in self.meta:
                self.render(db, d, self.meta[d])
        self._dirty.clear()
        self._reset.clear()
        self._forgotten.clear()

    def extra_tables(self) -> tuple[str, ...]:
        return ()

    @abstractmethod
    def insert_rows(self, db: duckdb.DuckDBPyConnection) -> None:
        """Insert the rows buffered since the last flush."""

    @abstractmethod
    def render(self, db: duckdb.DuckDBPyConnection, discussion: str, meta: DiscussionMeta) -> None:
        """Write the files of `discussion` from the rows (uncommitted ones included)."""

    @abstractmethod
    def files_of(self, agent: str, discussion: str) -> list[Path]:
        """Every file this projection may write for `discussion` (for forgetting)."""

    def expected_files(self, discussion: str, meta: DiscussionMeta) -> list[Path]:
        """The files that must exist for `discussion` in its current state."""
        return []

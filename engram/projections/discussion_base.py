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

A discussion is named by its agent and its id together (`Key`): two agents may each have a discussion `my-trip`,
with rows and files of their own. Version 2 of these tables keys them so (version 1 keyed the id alone).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import duckdb
import pyarrow as pa

from engram.events.control import AgentForgotten, DiscussionForgotten, GenerationStarted
from engram.events.discussion import MemoryFileCreated
from engram.events.envelope import Recorded
from engram.kernel import records
from engram.projections.base import TableProjection


Key = tuple[str, str]  # (agent, discussion id): a discussion id is unique within its agent only


@dataclass
class DiscussionMeta:
    agent: str
    generation: int = 0
    created: bool = False  # the store of this projection exists (MemoryFileCreated for it)
    count: int = 0  # memories of the current generation
    last_seq: int = 0  # seq of the last event folded for this discussion


class PerDiscussionProjection(TableProjection):
    """A table projection whose rows belong to discussions and render into per-discussion files."""

    version: ClassVar[int] = 2  # 2: rows keyed by (agent, discussion_id)
    store: ClassVar[str]  # the MemoryFileCreated store this projection renders
    meta_table: ClassVar[str]
    rows_table: ClassVar[str]
    control_types: ClassVar[frozenset[str]] = frozenset(
        {"GenerationStarted", "DiscussionForgotten", "AgentForgotten", "MemoryFileCreated"}
    )

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        columns = ", ".join(f"{name} {sql} NOT NULL" for name, sql, _ in META_COLUMNS)
        db.execute(f"CREATE TABLE IF NOT EXISTS {self.meta_table} ({columns}, PRIMARY KEY (agent, discussion_id))")
        self.create_tables(db)
        self.meta: dict[Key, DiscussionMeta] = {}
        self._dirty: set[Key] = set()  # discussions whose files must be rendered
        self._reset: set[Key] = set()  # discussions whose stored rows must be dropped first
        self._forgotten: set[Key] = set()  # discussions whose files and rows go away

    @abstractmethod
    def create_tables(self, db: duckdb.DuckDBPyConnection) -> None: ...

    def load(self, db: duckdb.DuckDBPyConnection) -> None:
        missing = []  # discussions with a file deleted while we were down: rendered again
        for d, agent, gen, created, count, last in db.execute(
            f"SELECT {', '.join(name for name, _, _ in META_COLUMNS)} FROM {self.meta_table}"
        ).fetchall():
            key = (agent, d)
            self.meta[key] = DiscussionMeta(agent, gen, created, count, last)
            if any(not p.exists() for p in self.expected_files(key, self.meta[key])):
                missing.append((key, self.meta[key]))
        for group in render_groups(sorted(missing, key=lambda item: item[0])):
            self.render_many(db, group)

    # ------------------------------------------------------------------ folding

    def apply(self, rec: Recorded) -> None:
        ev = rec.event
        if isinstance(ev, AgentForgotten):
            for d in [d for d, m in self.meta.items() if m.agent == ev.agent_id]:
                self._forget(d)
            return
        if isinstance(ev, DiscussionForgotten):
            self._forget((rec.agent, ev.discussion_id))
            return
        if rec.stream.startswith("agent:"):
            return
        d = (rec.agent, rec.stream)
        meta = self.meta.get(d)
        if meta is None:
            meta = self.meta[d] = DiscussionMeta(rec.agent)
            self._forgotten.discard(d)
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

    def on_reset(self, discussion: Key) -> None:
        """Drop buffered rows of `discussion` (a new generation started)."""

    def _forget(self, discussion: Key) -> None:
        meta = self.meta.pop(discussion, None)
        if meta is not None:
            self._forgotten.add(discussion)
            self._reset.add(discussion)
            self._dirty.discard(discussion)
            self.on_reset(discussion)

    # ------------------------------------------------------------------ writing

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        gone = sorted(self._reset)
        if gone:
            for table in (self.rows_table, *self.extra_tables()):
                delete_discussions(db, table, gone)
        self.insert_rows(db)
        changed = sorted(self._dirty | self._forgotten)
        if changed:
            delete_discussions(db, self.meta_table, changed)
            rows = [(d[1], m.agent, m.generation, m.created, m.count, m.last_seq) for d, m in
                    ((d, self.meta[d]) for d in sorted(self._dirty) if d in self.meta)]
            if rows:  # one Arrow insert (an `executemany` ran row by row: ~500 rows/s, issue 27)
                records.insert_arrow(db, self.meta_table, pa.Table.from_arrays(
                    [pa.array(col, type=f.type) for col, f in zip(zip(*rows), META_SCHEMA)], schema=META_SCHEMA))
        for agent, discussion in sorted(self._forgotten):
            for path in self.files_of(agent, discussion):
                path.unlink(missing_ok=True)
        dirty = [(key, self.meta[key]) for key in sorted(self._dirty) if key in self.meta]
        for group in render_groups(dirty):
            self.render_many(db, group)
        self._dirty.clear()
        self._reset.clear()
        self._forgotten.clear()

    def extra_tables(self) -> tuple[str, ...]:
        return ()

    @abstractmethod
    def insert_rows(self, db: duckdb.DuckDBPyConnection) -> None:
        """Insert the rows buffered since the last flush."""

    @abstractmethod
    def render_many(self, db: duckdb.DuckDBPyConnection, discussions: list[tuple[Key, DiscussionMeta]]) -> None:
        """Write the files of each of `discussions` (sorted, each with its meta) from the rows (uncommitted ones
        included), reading the rows of all of them in a query or two, not a query per discussion (issue 27)."""

    @abstractmethod
    def files_of(self, agent: str, discussion: str) -> list[Path]:
        """Every file this projection may write for `discussion` (for forgetting)."""

    def expected_files(self, discussion: Key, meta: DiscussionMeta) -> list[Path]:
        """The files that must exist for `discussion` in its current state."""
        return []


# A checkpoint renders the discussions it changed a group at a time: the rows of a group read in one query, a group
# holding at most this many discussions and (by their memory counts) about this many rows, so that rendering many
# large discussions at once (a replay's checkpoint) holds no more than a group's rows (a vector memory's row is
# some 2-3 KB in Python with its vector: a few MB a group).
RENDER_GROUP_DISCUSSIONS = 512
RENDER_GROUP_ROWS = 2_000

# A per-discussion projection's meta table, declared once: (column, DuckDB type, Arrow type).
META_COLUMNS = (("discussion_id", "VARCHAR", pa.string()), ("agent", "VARCHAR", pa.string()),
                ("generation", "INTEGER", pa.int32()), ("created", "BOOLEAN", pa.bool_()),
                ("memory_count", "INTEGER", pa.int32()), ("last_seq", "BIGINT", pa.int64()))
META_SCHEMA = pa.schema([(name, arrow) for name, _, arrow in META_COLUMNS])


def render_groups(items: list[tuple[Key, DiscussionMeta]]) -> list[list[tuple[Key, DiscussionMeta]]]:
    """`items` cut into consecutive groups of at most `RENDER_GROUP_DISCUSSIONS` discussions and, past the first
    discussion of a group, `RENDER_GROUP_ROWS` memories."""
    groups: list[list[tuple[Key, DiscussionMeta]]] = []
    rows = 0
    for item in items:
        count = max(item[1].count, 1)
        if not groups or len(groups[-1]) >= RENDER_GROUP_DISCUSSIONS or rows + count > RENDER_GROUP_ROWS:
            groups.append([])
            rows = 0
        groups[-1].append(item)
        rows += count
    return groups


def keys_table(discussions: list[tuple[Key, DiscussionMeta]]) -> pa.Table:
    """The (agent, discussion_id) keys of `discussions` as an Arrow table, to join a projection's rows with."""
    return records.key_table({"agent": [k[0] for k, _ in discussions], "discussion_id": [k[1] for k, _ in discussions]})


def delete_discussions(db: duckdb.DuckDBPyConnection, table: str, keys: list[Key]) -> None:
    """Delete the rows of `table` that belong to the discussions `keys` ((agent, discussion id) pairs)."""
    records.delete_keys(db, table, {"agent": [a for a, _ in keys], "discussion_id": [d for _, d in keys]})

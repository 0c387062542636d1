"""`discussions`: one row per discussion with its message count, tokens and time span."""

from __future__ import annotations

from typing import ClassVar

import duckdb
import pyarrow as pa

from engram.events.control import AgentForgotten, DiscussionForgotten
from engram.events.envelope import Recorded
from engram.events.messages import MessageAppended
from engram.kernel import records
from engram.projections.base import TableProjection
from engram.projections.discussion_base import Key, delete_discussions

_SCHEMA = pa.schema(
    [
        ("discussion_id", pa.string()),
        ("agent", pa.string()),
        ("messages", pa.int64()),
        ("tokens", pa.int64()),
        ("first_ts", pa.timestamp("us", tz="UTC")),
        ("last_ts", pa.timestamp("us", tz="UTC")),
        ("last_seq", pa.int64()),
    ]
)


class DiscussionIndex(TableProjection):
    name = "discussions"
    version: ClassVar[int] = 2  # 2: one row per (agent, discussion_id): two agents may each have a `my-trip`
    tables: ClassVar[tuple[str, ...]] = ("discussions",)
    interests = frozenset({"MessageAppended", "DiscussionForgotten", "AgentForgotten"})

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(
            """CREATE TABLE IF NOT EXISTS discussions (
                discussion_id VARCHAR NOT NULL, agent VARCHAR NOT NULL, messages BIGINT NOT NULL,
                tokens BIGINT NOT NULL, first_ts TIMESTAMPTZ, last_ts TIMESTAMPTZ, last_seq BIGINT NOT NULL,
                PRIMARY KEY (agent, discussion_id))"""
        )
        self._rows: dict[Key, list] = {}
        self._dirty: set[Key] = set()
        self._deleted: set[Key] = set()

    def load(self, db: duckdb.DuckDBPyConnection) -> None:
        for row in db.execute(
            "SELECT discussion_id, agent, messages, tokens, epoch_us(first_ts), epoch_us(last_ts), last_seq FROM discussions"
        ).fetchall():
            self._rows[(row[1], row[0])] = list(row)

    def apply(self, rec: Recorded) -> None:
        ev = rec.event
        if isinstance(ev, MessageAppended):
            key = (rec.agent, rec.stream)
            row = self._rows.get(key)
            if row is None:
                row = self._rows[key] = [rec.stream, rec.agent, 0, 0, rec.ts_us, rec.ts_us, rec.seq]
            row[2] += 1
            row[3] += ev.token_estimate
            row[4] = min(row[4], rec.ts_us)
            row[5] = max(row[5], rec.ts_us)
            row[6] = rec.seq
            self._dirty.add(key)
            self._deleted.discard(key)
        elif isinstance(ev, DiscussionForgotten):
            self._forget([(rec.agent, ev.discussion_id)])
        elif isinstance(ev, AgentForgotten):
            self._forget([d for d, row in self._rows.items() if row[1] == ev.agent_id])

    def _forget(self, ids: list[Key]) -> None:
        for d in ids:
            self._rows.pop(d, None)
            self._dirty.discard(d)
            self._deleted.add(d)

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        changed = sorted(self._dirty | self._deleted)
        if changed:
            delete_discussions(db, "discussions", changed)
        if self._dirty:
            rows = [self._rows[d] for d in sorted(self._dirty)]
            table = pa.Table.from_arrays(
                [pa.array(col, type=f.type) for col, f in zip(zip(*rows), _SCHEMA)], schema=_SCHEMA
            )
            records.insert_arrow(db, "discussions", table)
        self._dirty.clear()
        self._deleted.clear()

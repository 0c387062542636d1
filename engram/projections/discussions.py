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

    def apply_batch(self, batch: list[Recorded]) -> None:
        """Runs of messages, most of a log, are counted a run at a time (`_messages`); forgets one by one, in place."""
        self.apply_in_runs(batch, MessageAppended, self._messages)

    def _messages(self, run: list[Recorded]) -> None:
        """Count a run of messages into their discussions' rows: a few operations per message, the sets once per run."""
        rows = self._rows
        touched: dict[Key, None] = {}
        for rec in run:
            key = (rec.agent, rec.stream)
            ts = rec.ts_us
            row = rows.get(key)
            if row is None:
                row = rows[key] = [rec.stream, rec.agent, 0, 0, ts, ts, rec.seq]
            row[2] += 1
            row[3] += rec.event.token_estimate  # type: ignore[attr-defined]  # a MessageAppended: apply_batch's run
            if ts < row[4]:
                row[4] = ts
            if ts > row[5]:
                row[5] = ts
            row[6] = rec.seq
            touched[key] = None
        self._dirty.update(touched)
        self._deleted.difference_update(touched)

    def apply(self, rec: Recorded) -> None:
        ev = rec.event
        if isinstance(ev, MessageAppended):
            self._messages([rec])
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

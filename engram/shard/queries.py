"""SQL over the shard's log and projections, and its status (a part of `ShardHost`)."""

from __future__ import annotations

from typing import Any, Sequence

import msgspec

from engram.kernel.gate import shared
from engram.projections.traces import TraceProjection
from engram.shard.base import ShardBase
from engram.sql import DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_S, LiveShard, QueryResult, run_readonly
from engram.sql.gathered import shard_relations

PROJECTION_CATALOG = "proj"  # the name the shard's projection database is attached under (`ShardHost._open_projections`)


class ShardQueries(ShardBase):
    """SQL over the shard's log and projections, and its status (a part of `ShardHost`)."""

    @shared
    def sql(
        self,
        sql: str,
        params: Sequence[Any] | None = None,
        *,
        agents: Sequence[str] | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        max_rows: int | None = DEFAULT_MAX_ROWS,
    ) -> QueryResult:
        """Run one read-only statement over this shard's log and projections, confined (`engram.sql`):
        never on the writer's connection; with `agents`, over those agents' rows only."""
        return run_readonly(sql, self._sql_source(), params=params, agents=agents, timeout_s=timeout_s, max_rows=max_rows)

    @shared
    def query(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """engram's own `sql` (never a user's), without a row limit, as (column names, rows): confined like a user's,
        in a session kept open for engram's queries (`engram.sql.OwnSessions`) rather than a new one each time."""
        result = run_readonly(sql, self._sql_source(), params=params, max_rows=None, sessions=self.own_sessions)
        return result.columns, result.rows

    @shared
    def expected_files(self, agent: str, discussion: str) -> tuple[bool, bool, bool]:
        """Which of `agent`'s `discussion` files the projections say exist (memories, summary, vector store), as their
        last checkpoint wrote them: `EXPECTED_SQL` (engram's own fixed statement, its values bound as parameters, no
        text of a user's) on a cursor of its own over the projection database, which sees committed rows only, as a
        confined session does. A chat turn's creator node asks it once a turn whenever a file is not on disk (a new
        discussion's, a summary not made yet): in a confined session, even a kept one, it cost ~14 ms of the shard's
        CPU in process and 25-60 ms under a chat load (the relations copied in each time); so ~2 ms (issue 27)."""
        from engram.memory.discussion.memory_files import EXPECTED_SQL

        cur = self.store.cursor()
        try:
            cur.execute(f"USE {PROJECTION_CATALOG}")
            row = cur.execute(EXPECTED_SQL, [discussion, agent]).fetchone()
        finally:
            cur.close()
        return (bool(row[0]), bool(row[1]), bool(row[2])) if row else (False, False, False)

    def _sql_source(self) -> LiveShard:
        catalog = self.store.query("SELECT current_database()")[1][0][0]
        return LiveShard(shard=self.shard, cursor=self.store.cursor, log_table=f'"{catalog}".main.events',
                         projection_catalog=PROJECTION_CATALOG, projections=self.paths)

    @shared
    def relations(self, names: list[str] | None, agents: Sequence[str] | None = None) -> dict[str, Any]:
        """The relations a query over every shard reads, from this shard (`engram.sql.gathered`); `agents`: only
        their rows."""
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

    def progress(self) -> dict[str, Any]:
        """What waiting for idle looks at, many times a second: the head and the projections' checkpointed
        positions, read from memory (`status` also queries the log and the projection database). Policy actors
        lingering for events they read (`EventStore.wait_for`) move their positions to the head now."""
        self.store.nudge()
        return {"shard": self.shard, "head": self.store.head(), "projections": dict(self.runner.checkpointed)}

    @shared
    def status(self) -> dict[str, Any]:
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
        traces = next((p for p in self.runner.projections if isinstance(p, TraceProjection)), None)
        return None if traces is None else len(traces.memories)

    def _fold_failures(self) -> list[dict[str, Any]]:
        if not self.runner.any_failed:
            return []
        cur = self.store.cursor()
        try:
            cur.execute("USE proj")
            return [msgspec.to_builtins(f) for f in self.runner.failures(cur)]
        finally:
            cur.close()

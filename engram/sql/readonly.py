"""Read-only, confined SQL: the one way user SQL reaches an engram home.

    run_readonly(sql, source, *, params=None, agents=None, timeout_s=30.0, max_rows=10_000) -> QueryResult

`source` says where the data is:

- `HomeFiles(log_paths, projections)`: the home's DuckDB files, when no process holds them (the CLI
  without a server). Unscoped, the confined session attaches them READ_ONLY.
- `LiveShard(...)`: inside the process that owns a shard's writer (`ShardHost.sql`). DuckDB refuses
  a second attach of a file this process already has open ("Unique file handle conflict", even
  read-only), and the writer's own connection cannot be confined without confining the writer.
  So the confined session gets the data instead of the files: the relations the query names are
  read through a cursor of the writer's instance (a consistent MVCC snapshot) into Arrow tables
  and registered in the confined session, which never sees a file.
- Scoped queries (`agents`, e.g. an API key's agents) always take the second way, on either
  source: only those agents' rows are read, so the session holds nothing else to find.

Whatever the source, the session the query runs in is a fresh in-memory DuckDB instance with
external access disabled (no file, network, extension or Python-variable access), its
configuration locked, a memory limit, and nothing writable of the home in it. Before anything
runs, DuckDB's own parser (`extract_statements`) must find exactly one statement of a read-only
type (SELECT, which covers DESCRIBE/SHOW/SUMMARIZE, or EXPLAIN). A timer interrupts the query
after `timeout_s`; at most `max_rows` rows are returned (`truncated` says more existed).

Errors are `SqlError`s with a one-line message: `SqlRefused` (not a single read-only statement,
or empty), `SqlTimeout`, `SqlFailed` (DuckDB's own message, e.g. an unknown column).
"""

from __future__ import annotations

import heapq
import threading
import time
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

import duckdb
import msgspec
import pyarrow as pa

from engram.config.home import ProjectionPaths
from engram.sql import views as sqlviews

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_ROWS = 10_000
# What the confined session may use of the process's memory (the process may be the shard's writer).
MEMORY_LIMIT = "1GB"
READ_ONLY_STATEMENTS = {duckdb.StatementType.SELECT: "SELECT", duckdb.StatementType.EXPLAIN: "EXPLAIN"}


class SqlError(ValueError):
    """A query that was not run, or did not finish; the message is one line for the user."""


class SqlRefused(SqlError):
    pass


class SqlTimeout(SqlError):
    pass


class SqlFailed(SqlError):
    pass


class QueryResult(msgspec.Struct, frozen=True):
    columns: list[str]
    rows: list[tuple]
    truncated: bool = False  # the query had more than `max_rows` rows; these are the first ones


@dataclass(frozen=True)
class HomeFiles:
    """A home's DuckDB files, opened read-only (nobody else may be writing them)."""

    log_paths: dict[int, Path]
    projections: ProjectionPaths

    @contextmanager
    def trusted(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[int, str], dict[int, str]]]:
        """A session of ours (not the user's) with the files attached read-only: (connection, logs, catalogs)."""
        con = duckdb.connect()
        try:
            logs, catalogs = sqlviews.attach_readonly(con, self.log_paths, self.projections)
            yield con, logs, catalogs
        finally:
            con.close()


@dataclass(frozen=True)
class LiveShard:
    """One shard inside the process that writes it: `cursor()` gives a new cursor of the writer's instance."""

    shard: int
    cursor: Callable[[], duckdb.DuckDBPyConnection]
    log_table: str  # e.g. '"shard-000".main.events'
    projection_catalog: str | None  # the attached projection database, e.g. "proj"
    projections: ProjectionPaths

    @contextmanager
    def trusted(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[int, str], dict[int, str]]]:
        cur = self.cursor()
        try:
            catalogs = {self.shard: self.projection_catalog} if self.projection_catalog else {}
            yield cur, {self.shard: self.log_table}, catalogs
        finally:
            cur.close()


class Source(Protocol):
    """What a confined statement reads: a home's files (`HomeFiles`), one live shard (`LiveShard`), or every shard's
    relations gathered in memory (`engram.sql.gathered.GatheredShards`)."""

    @property
    def projections(self) -> ProjectionPaths: ...

    def trusted(self) -> AbstractContextManager[tuple[duckdb.DuckDBPyConnection, dict[int, str], dict[int, str]]]: ...


def check_statement(sql: str) -> None:
    """Raise SqlRefused unless `sql` is exactly one read-only statement, as DuckDB's parser sees it."""
    if not isinstance(sql, str):
        raise SqlRefused(f"a query is text, got {type(sql).__name__}")
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise SqlFailed(_one_line(exc)) from None
    if not statements:
        raise SqlRefused("empty query: give one SELECT statement")
    if len(statements) > 1:
        raise SqlRefused(f"{len(statements)} statements given; engram runs one read-only statement at a time")
    kind = statements[0].type
    if kind not in READ_ONLY_STATEMENTS:
        name = str(kind).rsplit(".", 1)[-1]
        raise SqlRefused(f"{name} statements are not allowed: engram SQL is read-only (SELECT, DESCRIBE, SHOW, EXPLAIN)")


def run_readonly(
    sql: str,
    source: Source,
    *,
    params: Sequence[Any] | dict | None = None,
    agents: Sequence[str] | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    sessions: OwnSessions | None = None,
) -> QueryResult:
    """Run one read-only statement over `source` in a confined session (see the module docstring).

    `agents`: when given, the query sees only rows of these agents (tables without an agent column
    are left out). `timeout_s`/`max_rows`: None for no limit. `sessions`: engram's own queries over a `LiveShard`
    (never a user's, never scoped) run in one of these kept sessions instead of a new one (`OwnSessions`).
    """
    check_statement(sql)
    if agents is not None:
        agents = sorted(set(agents))
    pool = sessions if agents is None and isinstance(source, LiveShard) else None
    session = pool.take() if pool is not None else Session()
    con, reusable = session.con, False
    try:
        with _deadline(timeout_s, con) as deadline:
            if isinstance(source, HomeFiles) and agents is None:
                logs, catalogs = sqlviews.attach_readonly(con, source.log_paths, source.projections)
                sqlviews.create_log_views(con, logs)
                sqlviews.create_projection_views(con, catalogs, source.projections)
            else:
                _load(session, source, sql, agents, deadline)
            session.lock()
            if deadline.expired:  # the time ran out while the data was being gathered
                raise duckdb.InterruptException("interrupted")
            try:
                result = con.execute(sql, params) if params else con.execute(sql)
                names = [d[0] for d in result.description] if result.description else []
                rows = result.fetchall() if max_rows is None else result.fetchmany(max_rows + 1)
            except duckdb.InterruptException:
                raise
            except duckdb.CatalogException as exc:
                reusable = True
                raise SqlFailed(_one_line(exc) + _tables_hint(con, exc)) from None
            except duckdb.Error as exc:
                reusable = True
                raise SqlFailed(_one_line(exc)) from None
            reusable = True
    except duckdb.InterruptException:
        reusable = False
        raise SqlTimeout(f"the query ran longer than {timeout_s:g} s and was stopped") from None
    finally:
        if pool is not None:
            pool.give_back(session, reusable)
        else:
            session.close()
    truncated = max_rows is not None and len(rows) > max_rows
    return QueryResult(columns=names, rows=rows[:max_rows] if truncated else rows, truncated=truncated)


def _tables_hint(con: duckdb.DuckDBPyConnection, exc: duckdb.CatalogException) -> str:
    """For a table the query names that does not exist: the tables and views it may name (DuckDB's own "did you
    mean" picks by spelling, e.g. `trace_strength` for `traces`, where the table is `memory_traces`)."""
    if "does not exist" not in str(exc) or "Table with name" not in str(exc):
        return ""
    names = [r[0] for r in con.execute(
        "SELECT DISTINCT table_name FROM information_schema.tables WHERE NOT starts_with(table_name, '_') "
        "AND NOT starts_with(table_name, 'ev_') ORDER BY 1").fetchall()]
    return f" The tables and views: {', '.join(names)}, and one ev_<event type> view per event type" if names else ""


# ---------------------------------------------------------------------- the session


def _confined_connection() -> duckdb.DuckDBPyConnection:
    return duckdb.connect(":memory:", config={"memory_limit": MEMORY_LIMIT, "python_enable_replacements": False})


def _lock(con: duckdb.DuckDBPyConnection) -> None:
    """No files, network, extensions or settings from here on: DuckDB enforces it, not our parsing."""
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


class Session:
    """A confined DuckDB session (a fresh in-memory instance) and what one query put in it: the relations it
    registered (Arrow tables, dropped after the query) and the views it made (kept: only SQL, no data)."""

    def __init__(self) -> None:
        self.con = _confined_connection()
        # What a statement reads is asked of a connection without the session's views: DuckDB's `get_table_names`
        # looks through a view it knows to the relations under it (and names none of them).
        self.parser = self.con.cursor()
        self.locked = False
        self.views: dict[str, str] = {}  # view name -> the SELECT it was made with
        self.shapes: dict[str, pa.Schema] = {}  # registered relation -> the columns it had
        self.registered: list[str] = []  # relations of the query running now

    def lock(self) -> None:
        if not self.locked:
            _lock(self.con)
            self.locked = True

    def register(self, name: str, table: pa.Table) -> None:
        """`name` reads `table` until the query is done. A relation whose columns changed since a view was made over
        it (a projection's new version, a new event field) has every view made again."""
        if self.shapes.get(name, table.schema) != table.schema:
            self.views.clear()
        self.shapes[name] = table.schema
        self.con.register(name, table)
        self.registered.append(name)

    def make_view(self, name: str, select: str) -> None:
        """CREATE OR REPLACE the temporary view `name`, unless this session made it with the same SELECT already."""
        if self.views.get(name) == select:
            return
        self.views.pop(name, None)
        self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {select}")
        self.views[name] = select

    def release(self) -> None:
        """Let go of the query's data: a kept session holds none of the shard's rows between queries (a forget's
        erased rows cannot outlive it here), and no query reads what an earlier one registered."""
        names, self.registered = self.registered, []
        for name in names:
            self.con.unregister(name)

    def close(self) -> None:
        self.registered = []
        self.parser.close()
        self.con.close()


class OwnSessions:
    """Confined sessions kept open for engram's own queries over a live shard (`ShardHost.query`: read models such
    as a chat turn's look at its discussion's files), never for a user's SQL: opening a DuckDB instance cost more
    CPU than most of those queries (15-50 ms a time on this machine, most of a chat turn's query at the shard).

    A session is confined like a new one (locked before it sees any data, external access off) and used by one
    query at a time (`take` / `give_back`: any number of threads). Each query registers the data it reads afresh
    from the writer's snapshot, and lets go of it after (`Session.release`): what stays is the views' SQL, made
    again when their SELECT changes (a new event type, a projection table that appears) or a relation's columns
    do. A session whose query was interrupted, or failed other than by the statement's own error, is closed."""

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep  # sessions kept idle at most (~7 MB each; more are opened while more queries run at once)
        self._idle: list[Session] = []
        self._lock = threading.Lock()
        self._closed = False
        self.opened = 0  # sessions opened so far

    def take(self) -> Session:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.opened += 1
        session = Session()
        session.lock()
        return session

    def give_back(self, session: Session, reusable: bool) -> None:
        try:
            session.release()
        except duckdb.Error:
            reusable = False
        with self._lock:
            if reusable and not self._closed and len(self._idle) < self.keep:
                self._idle.append(session)
                return
        session.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for session in idle:
            session.close()


class _Deadline:
    def __init__(self):
        self.extra: list[duckdb.DuckDBPyConnection] = []
        self.expired = False
        self.lock = threading.Lock()

    def watch(self, con: duckdb.DuckDBPyConnection) -> None:
        with self.lock:
            self.extra.append(con)
            if self.expired:
                con.interrupt()


class _Alarms:
    """One thread that calls each query's `expire` when its time is up: a timer thread per query cost its start
    (Thread.start waits until the new thread runs: milliseconds on busy cores) on every query. `expire` runs under
    the alarms' lock, so once `cancel` returns it cannot run any more (a kept session's next query is not
    interrupted by the last one's alarm)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int]] = []  # a heap of (when, alarm)
        self._expire: dict[int, Callable[[], None]] = {}  # the alarms not cancelled
        self._cond = threading.Condition()
        self._ids = 0
        self._thread: threading.Thread | None = None

    def set(self, timeout_s: float, expire: Callable[[], None]) -> int:
        with self._cond:
            self._ids += 1
            heapq.heappush(self._due, (time.monotonic() + timeout_s, self._ids))
            self._expire[self._ids] = expire
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="sql-deadlines", daemon=True)
                self._thread.start()
            if self._due[0][1] == self._ids:  # due before every other: the thread waits for it, not a later one
                self._cond.notify()
            return self._ids

    def cancel(self, alarm: int) -> None:
        with self._cond:
            self._expire.pop(alarm, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._due and self._due[0][1] not in self._expire:  # cancelled
                    heapq.heappop(self._due)
                if not self._due:
                    self._cond.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                self._expire.pop(heapq.heappop(self._due)[1])()


_ALARMS = _Alarms()


@contextmanager
def _deadline(timeout_s: float | None, con: duckdb.DuckDBPyConnection) -> Iterator[_Deadline]:
    deadline = _Deadline()

    def expire() -> None:
        with deadline.lock:
            deadline.expired = True
            for c in [con, *deadline.extra]:
                try:
                    c.interrupt()
                except duckdb.Error:
                    pass

    alarm = _ALARMS.set(timeout_s, expire) if timeout_s is not None else None
    try:
        yield deadline
        if deadline.expired:
            raise duckdb.InterruptException("interrupted")
    finally:
        if alarm is not None:
            _ALARMS.cancel(alarm)


def _load(session: Session, source: Source, sql: str, agents: list[str] | None, deadline: _Deadline) -> None:
    """Register, as Arrow tables, the relations `sql` needs (scoped to `agents`), and the views over them. A query
    that names none of engram's relations (e.g. `duckdb_views()`, `SHOW TABLES`) sees every view, each over an
    empty table of its relation's columns: what engram offers, without its data."""
    con = session.con
    wanted = _referenced(session.parser, sql, source.projections)
    log_views = sqlviews.log_view_types()
    tables = set(sqlviews.projection_table_names())
    catalog_only = not (wanted & (set(log_views) | tables | set(sqlviews.derived_views(source.projections))))
    types: set[str] | None = set()
    for name in wanted:
        if name in log_views:
            kinds = log_views[name]
            types = None if kinds is None or types is None else types | kinds
    needs_log = any(name in log_views for name in wanted)
    with source.trusted() as (trusted, logs, catalogs):
        deadline.watch(trusted)
        relations: dict[int, str] = {}
        if needs_log or catalog_only:
            for shard, table in sorted(logs.items()):
                name = f"_log_{shard:03d}"
                session.register(name, _fetch(trusted, table, agents, types, empty=catalog_only))
                relations[shard] = name
        sqlviews.create_log_views(con, relations, only=None if catalog_only else wanted, make=session.make_view)
        found = sqlviews.existing_projection_tables(trusted, catalogs, only=None if catalog_only else wanted & tables)
        parts: dict[str, list[tuple[int, str]]] = {}
        for table, present in found.items():
            for shard, qualified in present:
                if agents is not None and not _has_agent_column(trusted, qualified):
                    continue  # nothing in it says whose it is: a scoped query does not see it
                name = f"_proj_{shard:03d}_{table}"
                session.register(name, _fetch(trusted, qualified, agents, None, empty=catalog_only))
                parts.setdefault(table, []).append((shard, name))
        sqlviews.create_table_views(con, parts, source.projections, only=None if catalog_only else wanted,
                                    make=session.make_view)


def _referenced(con: duckdb.DuckDBPyConnection, sql: str, paths: ProjectionPaths) -> set[str]:
    """The views `sql` reads, with what the derived views it reads read in turn; every view if unsure."""
    everything = set(sqlviews.log_view_types()) | set(sqlviews.projection_table_names()) | set(sqlviews.derived_views(paths))
    try:
        names = {n.split(".")[-1].strip('"') for n in con.get_table_names(without_parameters(sql))}
    except duckdb.Error:
        return everything
    derived = sqlviews.derived_views(paths)
    todo = [n for n in names if n in derived]
    while todo:
        view = todo.pop()
        try:
            inner = {n.split(".")[-1].strip('"') for n in con.get_table_names(derived[view])}
        except duckdb.Error:
            return everything
        todo += [n for n in inner - names if n in derived]
        names |= inner
    return names


def without_parameters(sql: str) -> str:
    """`sql` with each prepared parameter (`?`, `?1`, `$1`, `$name`) written as NULL, for `get_table_names` alone:
    DuckDB cannot list the tables of a statement that has parameters (a "can't be prepared" binder error), and a
    parameter never names a table. Without this, every parameterised query (most of engram's own) loaded every
    relation of the shard, the whole log included. Found by DuckDB's own tokenizer, so a `?` inside a string or a
    comment stays; anything it cannot tokenize is returned as it is (the caller then loads every relation)."""
    try:
        tokens = duckdb.tokenize(sql)
    except duckdb.Error:
        return sql
    ends = [start for start, _ in tokens[1:]] + [len(sql)]
    text = [sql[start:end].rstrip() for (start, _), end in zip(tokens, ends)]
    out, last, i = [], 0, 0
    while i < len(tokens):
        start, kind = tokens[i]
        if kind == duckdb.token_type.operator and text[i] in ("?", "$"):
            end = start + 1
            follows = i + 1 < len(tokens) and tokens[i + 1][0] == end
            if follows and (text[i] == "$" or tokens[i + 1][1] == duckdb.token_type.numeric_const):
                i += 1  # the parameter's number or name, written against its sign
                end = tokens[i][0] + len(text[i])
            out += [sql[last:start], "NULL"]
            last = end
        i += 1
    return "".join(out) + sql[last:]


def _fetch(trusted: duckdb.DuckDBPyConnection, relation: str, agents: list[str] | None, types: set[str] | None,
           *, empty: bool = False) -> pa.Table:
    if empty:  # the columns only
        return trusted.sql(f"SELECT * FROM {relation} LIMIT 0").to_arrow_table()
    where, args = [], []
    if agents is not None:
        where.append("agent IN (SELECT unnest(?::VARCHAR[]))")
        args.append(agents)
    if types is not None:
        where.append("type IN (SELECT unnest(?::VARCHAR[]))")
        args.append(sorted(types))
    query = f"SELECT * FROM {relation}" + (f" WHERE {' AND '.join(where)}" if where else "")
    return trusted.sql(query, params=args or None).to_arrow_table()


def _has_agent_column(trusted: duckdb.DuckDBPyConnection, qualified: str) -> bool:
    result = trusted.execute(f"SELECT * FROM {qualified} LIMIT 0")
    names = [d[0] for d in result.description]
    result.fetchall()
    return "agent" in names


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines[:2]) if lines else type(exc).__name__



"""SQL over every shard at once: each shard sends the relations a query reads, the query runs once over all of them.

Running a query on each shard and concatenating the rows is wrong for anything that combines rows: a
`count(*)` comes back once per shard, an `ORDER BY ... LIMIT 5` gives five rows per shard, a join misses pairs
that live on different shards. So with several shards, the query is not sent to the shards; instead:

1. `referenced(query)`: the relations it names (DuckDB's own parser): the log views (`events`, `ev_<type>`,
   `messages`, `events_raw`) need the log table, projection tables need themselves; projection file views read
   the files, which every shard writes into the same projections directory.
2. `shard_relations` (in each shard's process, with the writer's cursor: one consistent snapshot per shard)
   returns those relations as Arrow tables.
3. `GatheredShards` loads them into a fresh in-memory DuckDB: a source for engram's confined SQL entry point
   (`engram.sql.run_readonly`), which builds engram's usual views over them (the same `shard` column, the same
   unions), locks the session and runs the statement once.

Exact for every query (aggregates, ORDER BY/LIMIT, joins across shards); the price is that the relations a query
names cross from the shards to the caller (the log of every shard for a query over `events`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import duckdb

from engram.config.home import ProjectionPaths

LOG_VIEWS = {"events", "events_raw", "messages"}


def referenced(query: str) -> set[str] | None:
    """The relation names `query` reads (lower case); None (everything) when DuckDB cannot tell, or when it names a
    view over others (a projection file view, a derived view), whose inputs are not spelled out here."""
    try:
        names = {n.split(".")[-1].strip('"').lower() for n in duckdb.connect().get_table_names(query)}
    except duckdb.Error:
        return None
    known = projection_tables()
    if any(not (n in LOG_VIEWS or n.startswith("ev_") or n in known) for n in names):
        return None
    return names


def needs_log(names: set[str] | None) -> bool:
    return names is None or any(n in LOG_VIEWS or n.startswith("ev_") for n in names)


def projection_tables() -> set[str]:
    from engram.projections.registry import projection_classes

    return {t for cls in projection_classes() for t in getattr(cls, "tables", ())}


def shard_relations(cursor: Callable[[], duckdb.DuckDBPyConnection], names: set[str] | None,
                    projection_catalog: str = "proj", agents: Sequence[str] | None = None) -> dict[str, Any]:
    """What one shard contributes to `names`: {"log": Arrow table or None, "tables": {name: Arrow table}}.
    `agents`: only their rows (tables without an agent column are left out), as a scoped query sees them."""
    cur = cursor()
    try:
        catalog = cur.execute("SELECT current_database()").fetchall()[0][0]
        scope, args = ("", None) if agents is None else (" WHERE agent IN (SELECT unnest(?::VARCHAR[]))", [list(agents)])
        log = (cur.sql(f'SELECT * FROM "{catalog}".main.events{scope}', params=args).to_arrow_table()
               if needs_log(names) else None)
        present = {t: {c for (c,) in cur.execute("SELECT column_name FROM duckdb_columns() WHERE database_name = ? "
                                                 "AND table_name = ?", [projection_catalog, t]).fetchall()}
                   for (t,) in cur.execute("SELECT table_name FROM duckdb_tables() WHERE database_name = ?",
                                           [projection_catalog]).fetchall()}
        wanted = projection_tables() if names is None else projection_tables() & names
        tables = {t: cur.sql(f'SELECT * FROM {projection_catalog}.main."{t}"{scope}', params=args).to_arrow_table()
                  for t in sorted(wanted & set(present)) if agents is None or "agent" in present[t]}
        return {"log": log, "tables": tables}
    finally:
        cur.close()


class GatheredShards:
    """Every shard's relations (`shard_relations`) in one in-memory DuckDB: a source for engram's confined SQL
    entry point, which scopes, locks and runs the user's statement over it as over one shard's files."""

    def __init__(self, parts: dict[int, dict[str, Any]], projections: ProjectionPaths):
        self.parts, self.projections = parts, projections

    @contextmanager
    def trusted(self) -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[int, str], dict[int, str]]]:
        con = duckdb.connect()
        try:
            logs, catalogs = load_parts(con, self.parts)
            yield con, logs, catalogs
        finally:
            con.close()


def load_parts(con: duckdb.DuckDBPyConnection, parts: dict[int, dict[str, Any]]) -> tuple[dict[int, str], dict[int, str]]:
    """Register every shard's log as `_log_NNN` and its projection tables in an in-memory catalog `proj_NNN`."""
    logs, catalogs = {}, {}
    for shard, part in sorted(parts.items()):
        if part["log"] is not None:
            con.register(f"_log_{shard:03d}", part["log"])
            logs[shard] = f"_log_{shard:03d}"
        if part["tables"]:
            catalog = f"proj_{shard:03d}"
            con.execute(f"ATTACH ':memory:' AS {catalog}")
            for table, data in part["tables"].items():
                con.register("_part", data)
                con.execute(f'CREATE TABLE {catalog}.main."{table}" AS SELECT * FROM _part')
                con.unregister("_part")
            catalogs[shard] = catalog
    return logs, catalogs

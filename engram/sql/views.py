"""The SQL face of engram: views over the log and the projections, for `engram sql`.

User SQL runs through `engram.sql.run_readonly` (read-only, confined); this module only defines
the views, over whatever relations a session is given.

- `events`: every event of every shard, its envelope plus one column per payload field of
  the catalogue (typed where the field has one type across the catalogue, JSON otherwise).
- `ev_<type>`: one view per event type, with just that type's fields (e.g. `ev_message_appended`).
  `ev_edge_added` and `ev_trace_reinforced` also list the edges and reinforcements recorded in the
  compact shapes (`TraceEncoded.links`, `EdgesAdded`, `TracesReinforced`; `engram.events.compact`),
  one row each, with the envelope of the event that carries them.
- `messages`: the conversation as it holds now, one row per MessageAppended with its latest edit, removed ones left out.
- `llm_costs`: the memory tasks' LLM calls per agent, endpoint and model, with tokens, dollars and `cost` ("local"
  for a server the user runs).
- every projection table (union over shards) and every projection file view.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

import duckdb
import msgspec

from engram.config.home import ProjectionPaths
from engram.events.base import registry

_ENVELOPE = ("seq", "stream", "stream_version", "type", "schema_version", "ts", "agent", "causation", "event_id", "recorded_at", "payload")


def _sql_type(t: msgspec.inspect.Type) -> str:
    if isinstance(t, msgspec.inspect.UnionType):
        inner = [x for x in t.types if not isinstance(x, msgspec.inspect.NoneType)]
        return _sql_type(inner[0]) if len(inner) == 1 else "JSON"
    if isinstance(t, msgspec.inspect.StrType):
        return "VARCHAR"
    if isinstance(t, msgspec.inspect.BoolType):
        return "BOOLEAN"
    if isinstance(t, msgspec.inspect.IntType):
        return "BIGINT"
    if isinstance(t, msgspec.inspect.FloatType):
        return "DOUBLE"
    return "JSON"


def _field_types(cls: type[msgspec.Struct]) -> dict[str, str]:
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)  # every event is a Struct
    return {f.encode_name: _sql_type(f.type) for f in info.fields}


def _column(name: str, sql_type: str) -> str:
    path = f"'$.{name}'"
    if sql_type == "VARCHAR":
        return f"payload->>{path} AS \"{name}\""
    if sql_type == "JSON":
        return f"payload->{path} AS \"{name}\""
    return f"TRY_CAST(payload->>{path} AS {sql_type}) AS \"{name}\""


def snake(tag: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", tag).lower()


def payload_columns() -> dict[str, str]:
    """Every payload field name across the catalogue with its SQL type (JSON where types differ)."""
    merged: dict[str, str] = {}
    for cls in registry().values():
        for name, sql_type in _field_types(cls).items():
            if name in _ENVELOPE or name == "shard":
                continue
            merged[name] = sql_type if merged.get(name, sql_type) == sql_type else "JSON"
    return dict(sorted(merged.items()))


_EMPTY_LOG = (
    "SELECT * FROM (SELECT NULL::INTEGER AS shard, NULL::BIGINT AS seq, NULL::VARCHAR AS stream, NULL::BIGINT AS "
    "stream_version, NULL::VARCHAR AS type, NULL::INTEGER AS schema_version, NULL::TIMESTAMPTZ AS ts, NULL::VARCHAR AS "
    "agent, NULL::BIGINT AS causation, NULL::VARCHAR AS event_id, NULL::TIMESTAMPTZ AS recorded_at, NULL::JSON AS payload) "
    "WHERE false"
)
_log_views_cache: tuple[int, dict[str, str]] = (-1, {})


_ENV = "shard, seq, stream, stream_version, ts, agent, causation, event_id"


def _items(event_type: str, field: str) -> str:
    """The rows of `event_type`, one per element `x` of its JSON array `field` (in order)."""
    return (f"(SELECT {_ENV}, payload, unnest(CAST(payload->'$.{field}' AS JSON[])) AS x FROM events_raw "
            f"WHERE type = '{event_type}' AND json_array_length(payload->'$.{field}') > 0)")


# Views of one event type that also show the same facts recorded in a compact shape.
_COMPACT_VIEWS = {
    "ev_edge_added": (
        f"SELECT {_ENV}, payload->>'$.src' AS src, payload->>'$.dst' AS dst, payload->>'$.kind' AS kind, "
        f"TRY_CAST(payload->>'$.weight' AS DOUBLE) AS weight FROM events_raw WHERE type = 'EdgeAdded' "
        f"UNION ALL SELECT {_ENV}, x->>0, payload->>'$.trace_id', x->>1, TRY_CAST(x->>2 AS DOUBLE) "
        f"FROM {_items('TraceEncoded', 'links')} "
        f"UNION ALL SELECT {_ENV}, x->>0, x->>1, x->>2, TRY_CAST(x->>3 AS DOUBLE) FROM {_items('EdgesAdded', 'edges')}"
    ),
    "ev_trace_reinforced": (
        f"SELECT {_ENV}, payload->>'$.trace_id' AS trace_id, payload->>'$.reason' AS reason FROM events_raw "
        f"WHERE type = 'TraceReinforced' "
        f"UNION ALL SELECT {_ENV}, x->>0, x->>1 FROM {_items('TracesReinforced', 'items')}"
    ),
}
_COMPACT_VIEW_TYPES = {
    "ev_edge_added": frozenset({"EdgeAdded", "TraceEncoded", "EdgesAdded"}),
    "ev_trace_reinforced": frozenset({"TraceReinforced", "TracesReinforced"}),
}


# What the memory tasks' LLM calls cost, per agent, endpoint and model, from the `LlmCall` every LLM-made event carries
# (a compaction's several). `cost`: "local" for a server the user runs (cost 0, never a price), "offline" for the
# labelled heuristic, else the dollars at list price (`llm.prices` adds models).
def llm_costs_sql(events: str = "events_raw") -> str:
    """The `llm_costs` view's query over `events` (a relation of the log's envelope and payload)."""
    return LLM_COSTS_SQL.replace("events_raw", events)


LLM_COSTS_SQL = """
WITH calls AS (
    SELECT agent, payload->'$.llm' AS c FROM events_raw WHERE json_type(payload->'$.llm') = 'OBJECT'
    UNION ALL
    SELECT agent, unnest(from_json(payload->'$.llm', '["JSON"]')) AS c FROM events_raw
    WHERE json_type(payload->'$.llm') = 'ARRAY'
)
SELECT agent, c->>'$.endpoint' AS endpoint, c->>'$.provider' AS provider, c->>'$.model' AS model,
       count(*) AS calls, count(*) FILTER (WHERE c->>'$.error' IS NOT NULL) AS failed,
       sum(TRY_CAST(c->>'$.input_tokens' AS BIGINT)) AS input_tokens,
       sum(TRY_CAST(c->>'$.output_tokens' AS BIGINT)) AS output_tokens,
       round(sum(TRY_CAST(c->>'$.cost_usd' AS DOUBLE)), 6) AS usd,
       CASE WHEN bool_and(coalesce(TRY_CAST(c->>'$.local' AS BOOLEAN), false)) THEN 'local'
            WHEN starts_with(c->>'$.model', 'offline-heuristic') THEN 'offline'
            ELSE printf('$%.4f', sum(TRY_CAST(c->>'$.cost_usd' AS DOUBLE))) END AS cost
FROM calls GROUP BY agent, endpoint, provider, model ORDER BY agent, endpoint, provider, model
"""


def log_view_sql() -> dict[str, str]:
    """The SQL of every view over `events_raw` by view name (built once per catalogue: inspecting it is slow)."""
    global _log_views_cache
    reg = registry()
    if _log_views_cache[0] == len(reg):
        return _log_views_cache[1]
    views = {"events": f"SELECT *, {', '.join(_column(n, t) for n, t in payload_columns().items())} FROM events_raw"}
    for tag, cls in sorted(reg.items()):
        fields = ", ".join(_column(n, t) for n, t in _field_types(cls).items() if n != "type")
        views[f"ev_{snake(tag)}"] = (
            f"SELECT shard, seq, stream, stream_version, ts, agent, causation, event_id{', ' + fields if fields else ''} "
            f"FROM events_raw WHERE type = '{tag}'"
        )
    views.update(_COMPACT_VIEWS)
    # The conversation as it holds now: an edited message (`MessageEdited`) with its latest words (`edited`: when), a
    # removed one (`MessageRemoved`) left out unless a later edit brought it back (a swipe back); the log keeps both
    # (`ev_message_appended`, `ev_message_edited`).
    views["messages"] = (
        "WITH changes AS (SELECT shard, agent, stream, payload->>'$.message_id' AS message_id, "
        "max(seq) FILTER (WHERE type = 'MessageEdited') AS edit_seq, "
        "coalesce(max(seq) FILTER (WHERE type = 'MessageRemoved') > "
        "coalesce(max(seq) FILTER (WHERE type = 'MessageEdited'), 0), false) AS removed "
        "FROM events_raw WHERE type IN ('MessageEdited', 'MessageRemoved') GROUP BY ALL), "
        "edits AS (SELECT shard, seq, ts, payload->>'$.content' AS content, "
        "TRY_CAST(payload->>'$.token_estimate' AS BIGINT) AS token_estimate FROM events_raw WHERE type = 'MessageEdited') "
        "SELECT m.shard, m.seq, m.stream AS discussion_id, m.agent, m.ts, m.payload->>'$.role' AS role, "
        "m.payload->>'$.name' AS name, coalesce(e.content, m.payload->>'$.content') AS content, "
        "m.payload->>'$.message_id' AS message_id, "
        "coalesce(e.token_estimate, TRY_CAST(m.payload->>'$.token_estimate' AS BIGINT)) AS token_estimate, "
        "e.ts AS edited FROM events_raw m "
        "LEFT JOIN changes c ON c.shard = m.shard AND c.agent = m.agent AND c.stream = m.stream "
        "AND c.message_id = m.payload->>'$.message_id' "
        "LEFT JOIN edits e ON e.shard = m.shard AND e.seq = c.edit_seq "
        "WHERE m.type = 'MessageAppended' AND c.removed IS NOT TRUE"
    )
    views["llm_costs"] = LLM_COSTS_SQL
    _log_views_cache = (len(reg), views)
    return views


ViewMaker = Callable[[str, str], None]  # (view name, its SELECT): creates or replaces the temporary view


def view_maker(con: duckdb.DuckDBPyConnection) -> ViewMaker:
    """Views made in `con` as they are asked for (a kept session passes its own, which skips the unchanged ones)."""
    def make(name: str, select: str) -> None:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {select}")

    return make


def create_log_views(con: duckdb.DuckDBPyConnection, logs: dict[int, str], only: set[str] | None = None,
                     make: ViewMaker | None = None) -> None:
    """Views over the event tables `logs` = {shard: "catalog.events"-qualified table name}; `only`: just these views
    (and `events_raw`), else every one. `make`: how a view is made (default: `view_maker(con)`)."""
    make = make or view_maker(con)
    if not logs:
        make("events_raw", _EMPTY_LOG)
    else:
        make("events_raw", " UNION ALL ".join(f"SELECT {shard}::INTEGER AS shard, * FROM {table}"
                                              for shard, table in sorted(logs.items())))
    for name, sql in log_view_sql().items():
        if only is None or name in only:
            make(name, sql)


# Tables the projection runner keeps beside the projections' own (see engram.projections.runner).
RUNNER_TABLES = ("fold_failed",)


def log_view_types() -> dict[str, frozenset[str] | None]:
    """Each view over the log and the event types it reads (None: every type)."""
    views: dict[str, frozenset[str] | None] = {"events_raw": None, "events": None, "messages": frozenset({"MessageAppended", "MessageEdited", "MessageRemoved"})}
    views.update({f"ev_{snake(tag)}": frozenset({tag}) for tag in registry()})
    views.update(_COMPACT_VIEW_TYPES)
    views["llm_costs"] = None
    return views


def projection_table_names() -> list[str]:
    from engram.projections.registry import projection_classes

    return [t for cls in projection_classes() for t in getattr(cls, "tables", ())] + list(RUNNER_TABLES)


def derived_views(paths: ProjectionPaths) -> dict[str, str]:
    """Views the projections define over other views (e.g. `trace_strength`), by name."""
    from engram.projections.registry import projection_classes

    out: dict[str, str] = {}
    for cls in projection_classes():
        views = getattr(cls, "sql_views", None)
        if views is not None:
            out.update(views(paths))
    return out


def existing_projection_tables(
    con: duckdb.DuckDBPyConnection, catalogs: dict[int, str], only: set[str] | None = None
) -> dict[str, list[tuple[int, str]]]:
    """{table: [(shard, "catalog.table"), ...]} for the projection tables each shard's catalog holds (`only`: of these)."""
    if not catalogs:
        return {}
    present = set(con.execute(
        "SELECT database_name, table_name FROM duckdb_tables() WHERE database_name IN (SELECT unnest(?::VARCHAR[]))",
        [list(catalogs.values())],
    ).fetchall())
    found: dict[str, list[tuple[int, str]]] = {}
    for table in projection_table_names():
        if only is not None and table not in only:
            continue
        for shard, cat in sorted(catalogs.items()):
            if (cat, table) in present:
                found.setdefault(table, []).append((shard, f"{cat}.{table}"))
    return found


def create_projection_views(con: duckdb.DuckDBPyConnection, catalogs: dict[int, str], paths: ProjectionPaths) -> None:
    """Views over projection tables (unioned across shard catalogs) and projection files."""
    create_table_views(con, existing_projection_tables(con, catalogs), paths)


def create_table_views(
    con: duckdb.DuckDBPyConnection, relations: dict[str, list[tuple[int, str]]], paths: ProjectionPaths,
    only: set[str] | None = None, make: ViewMaker | None = None,
) -> None:
    """One view per projection table over its `relations` ({table: [(shard, relation)]}), then the derived views
    (`only`: just these). `make`: how a view is made (default: `view_maker(con)`)."""
    make = make or view_maker(con)
    for table, parts in relations.items():
        make(table, " UNION ALL BY NAME ".join(f"SELECT {shard}::INTEGER AS shard, * FROM {rel}" for shard, rel in parts))
    for name, sql in derived_views(paths).items():
        if only is not None and name not in only:
            continue
        try:
            make(name, sql)
        except duckdb.Error:
            # A view over tables that do not exist yet (e.g. no traces): leave it out.
            continue


def attach_readonly(con: duckdb.DuckDBPyConnection, log_paths: dict[int, Path], projections: ProjectionPaths):
    """Attach every existing log and projection database READ_ONLY; returns ({shard: log table}, {shard: catalog})."""
    logs, catalogs = {}, {}
    for shard, path in sorted(log_paths.items()):
        if Path(path).exists():
            con.execute(f"ATTACH '{_quote(path)}' AS log_{shard:03d} (READ_ONLY)")
            logs[shard] = f"log_{shard:03d}.events"
        proj = projections.shard_db(shard)
        if proj.exists():
            con.execute(f"ATTACH '{_quote(proj)}' AS proj_{shard:03d} (READ_ONLY)")
            catalogs[shard] = f"proj_{shard:03d}"
    return logs, catalogs


def open_readonly(log_paths: dict[int, Path], projections: ProjectionPaths) -> duckdb.DuckDBPyConnection:
    """An in-memory session of engram's own (not for user SQL: see `engram.sql`) with every log and projection
    database attached read-only."""
    con = duckdb.connect()
    logs, catalogs = attach_readonly(con, log_paths, projections)
    create_log_views(con, logs)
    create_projection_views(con, catalogs, projections)
    return con


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")

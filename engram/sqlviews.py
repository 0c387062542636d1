"""The SQL face of engram: views over the log and the projections, for `engram sql`.

- `events`: every event of every shard, its envelope plus one column per payload field of
  the catalogue (typed where the field has one type across the catalogue, JSON otherwise).
- `ev_<type>`: one view per event type, with just that type's fields (e.g. `ev_message_appended`).
  `ev_edge_added` and `ev_trace_reinforced` also list the edges and reinforcements recorded in the
  compact shapes (`TraceEncoded.links`, `EdgesAdded`, `TracesReinforced`; `engram.events.compact`),
  one row each, with the envelope of the event that carries them.
- `messages`: the conversation, one row per MessageAppended.
- every projection table (union over shards) and every projection file view.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import msgspec

from engram.events.base import registry
from engram.home import ProjectionPaths

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


def _field_types(cls) -> dict[str, str]:
    info = msgspec.inspect.type_info(cls)
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


def create_log_views(con: duckdb.DuckDBPyConnection, logs: dict[int, str]) -> None:
    """Views over the event tables `logs` = {shard: "catalog.events"-qualified table name}."""
    if not logs:
        con.execute(
            "CREATE OR REPLACE TEMP VIEW events_raw AS SELECT * FROM (SELECT NULL::INTEGER AS shard, NULL::BIGINT AS seq, "
            "NULL::VARCHAR AS stream, NULL::BIGINT AS stream_version, NULL::VARCHAR AS type, NULL::INTEGER AS schema_version, "
            "NULL::TIMESTAMPTZ AS ts, NULL::VARCHAR AS agent, NULL::BIGINT AS causation, NULL::VARCHAR AS event_id, "
            "NULL::TIMESTAMPTZ AS recorded_at, NULL::JSON AS payload) WHERE false"
        )
    else:
        union = " UNION ALL ".join(f"SELECT {shard}::INTEGER AS shard, * FROM {table}" for shard, table in sorted(logs.items()))
        con.execute(f"CREATE OR REPLACE TEMP VIEW events_raw AS {union}")
    cols = ", ".join(_column(n, t) for n, t in payload_columns().items())
    con.execute(f"CREATE OR REPLACE TEMP VIEW events AS SELECT *, {cols} FROM events_raw")
    for tag, cls in sorted(registry().items()):
        fields = ", ".join(_column(n, t) for n, t in _field_types(cls).items() if n != "type")
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW ev_{snake(tag)} AS SELECT shard, seq, stream, stream_version, ts, agent, "
            f"causation, event_id{', ' + fields if fields else ''} FROM events_raw WHERE type = '{tag}'"
        )
    for name, sql in _COMPACT_VIEWS.items():
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")
    con.execute(
        "CREATE OR REPLACE TEMP VIEW messages AS SELECT shard, seq, stream AS discussion_id, agent, ts, "
        "payload->>'$.role' AS role, payload->>'$.name' AS name, payload->>'$.content' AS content, "
        "payload->>'$.message_id' AS message_id, TRY_CAST(payload->>'$.token_estimate' AS BIGINT) AS token_estimate "
        "FROM events_raw WHERE type = 'MessageAppended'"
    )


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


def create_projection_views(con: duckdb.DuckDBPyConnection, catalogs: dict[int, str], paths: ProjectionPaths) -> None:
    """Views over projection tables (unioned across shard catalogs) and projection files."""
    from engram.projections.registry import projection_classes

    for cls in projection_classes():
        for table in getattr(cls, "tables", ()):
            parts = [
                f"SELECT {shard}::INTEGER AS shard, * FROM {cat}.{table}"
                for shard, cat in sorted(catalogs.items())
                if _has_table(con, cat, table)
            ]
            if parts:
                con.execute(f"CREATE OR REPLACE TEMP VIEW {table} AS {' UNION ALL BY NAME '.join(parts)}")
        views = getattr(cls, "sql_views", None)
        if views is not None:
            for name, sql in views(paths).items():
                try:
                    con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {sql}")
                except duckdb.Error:
                    # A file view over files that do not exist yet (e.g. no memories): leave it out.
                    continue


def _has_table(con: duckdb.DuckDBPyConnection, catalog: str, table: str) -> bool:
    return bool(
        con.execute(
            "SELECT 1 FROM duckdb_tables() WHERE database_name = ? AND table_name = ?", [catalog, table]
        ).fetchone()
    )


def open_readonly(log_paths: dict[int, Path], projections: ProjectionPaths) -> duckdb.DuckDBPyConnection:
    """An in-memory session with every log and projection database attached read-only."""
    con = duckdb.connect()
    logs, catalogs = {}, {}
    for shard, path in sorted(log_paths.items()):
        if path.exists():
            con.execute(f"ATTACH '{_quote(path)}' AS log_{shard:03d} (READ_ONLY)")
            logs[shard] = f"log_{shard:03d}.events"
        proj = projections.shard_db(shard)
        if proj.exists():
            con.execute(f"ATTACH '{_quote(proj)}' AS proj_{shard:03d} (READ_ONLY)")
            catalogs[shard] = f"proj_{shard:03d}"
    create_log_views(con, logs)
    create_projection_views(con, catalogs, projections)
    return con


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")

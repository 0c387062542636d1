"""One declaration per record: a table's Arrow schema, DDL, rows and SQL column lists derived from it.

A record that crosses layers (a memory trace, a chunk memory, a working-memory slot, ...) is declared once, as a
`msgspec.Struct` or a dataclass whose fields say how each is stored:

    class Slot(msgspec.Struct):
        trace_id: str
        entered_us: Annotated[int, Column("entered_at", timestamp=True)]

A field's column is named after the field unless `Column(name)` says otherwise, and its SQL and Arrow types follow
from its Python type (`str` VARCHAR, `int` BIGINT, `float` DOUBLE, `bool` BOOLEAN, `tuple[str, ...]` / `list[str]`
/ `set[str]` VARCHAR[] (a set sorted), `tuple[int, ...]` BIGINT[], `X | None` nullable); `timestamp=True` stores
an int of microseconds as TIMESTAMPTZ; `json=True` stores a `tuple[tuple[str, str], ...]` of (key, value) pairs
as a JSON object in a VARCHAR (keys sorted; NULL when empty), read back as its pairs sorted. Columns come in the order of the fields, so the declaration is the table.
`Column(stored=False)` keeps a field out of the table; `Column(sql="INTEGER")` stores an int in 32 bits and
`Column(sql="FLOAT[]")` a numpy vector as float32s (read back as a float32 array); `required=True` is NOT NULL;
`Column(flatten=True)` on a field that holds a record makes that record's columns this one's, at its place.

Everything else is derived, never retyped:
- `arrow_schema(T)`, `ddl(table, T, key)`: the table;
- `laid_out(T, order, added)`, `layout_ddl`, `layout_schema`: a table (a file format's) that lays the record's
  columns out in its own order, with columns it computes from the record;
- `arrow_table(T, records)`: rows built column by column, by attribute name (no positional tuples);
- `insert_arrow(db, table, arrow)`: such a table inserted into its DuckDB table, by column name; `delete_keys(db,
  table, keys)`: the rows of many keys deleted in one statement;
- `select_list(T)` and `from_rows(T, names, rows)`: a record read back by column name;
- `columns(T, *items)`: a SQL select list checked against the declaration when it is built (at
  import), so that a renamed or dropped column fails there, not in a user's browser.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
import types
import typing
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import msgspec

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa


class Column(msgspec.Struct, frozen=True):
    """How a field is stored: its column name (None: the field's), a microsecond int stored as TIMESTAMPTZ, (key,
    value) pairs stored as a JSON object."""

    name: str | None = None
    timestamp: bool = False
    stored: bool = True
    json: bool = False
    sql: str | None = None  # a narrower type than the derived one: "INTEGER" for an int, "FLOAT[]" for a vector
    required: bool = False  # NOT NULL
    flatten: bool = False  # a field holding a record: its stored fields are columns here, in its declaration's order


class Field(msgspec.Struct, frozen=True):
    """One stored field of a record, resolved: attribute, column, SQL type, and how its value is read back."""

    attr: str
    column: str
    sql: str  # DuckDB type
    kind: str  # "scalar", "tuple", "list", "set": the Python container a list column is read back into; "json": pairs
    timestamp: bool
    nullable: bool
    default: Any  # the field's default, or NODEFAULT
    required: bool = False  # NOT NULL in its table


_SCALARS = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN"}


def _resolve(annotation: Any) -> tuple[Any, Column, bool]:
    """The bare type of an annotation, its Column (or the default one), and whether None is allowed."""
    column = Column()
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *extras = typing.get_args(annotation)
        column = next((e for e in extras if isinstance(e, Column)), column)
    nullable = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        if len(args) != 1:
            raise TypeError(f"a stored field must have one type (or it and None), not {annotation}")
        annotation = args[0]
    return annotation, column, nullable


def _sql_type(bare: Any, where: str) -> tuple[str, str]:
    if bare in _SCALARS:
        return _SCALARS[bare], "scalar"
    origin = typing.get_origin(bare)
    if origin in (tuple, list, set, frozenset):
        item = typing.get_args(bare)[0]
        if item in _SCALARS:
            return _SCALARS[item] + "[]", {tuple: "tuple", list: "list", set: "set", frozenset: "set"}[origin]
    raise TypeError(f"{where}: no column type for {bare}")


def _narrowed(bare: Any, sql: str, where: str) -> tuple[str, str]:
    """A column typed narrower than its Python type: a 32-bit int, or a float32 vector (a numpy array)."""
    if sql == "INTEGER" and bare is int:
        return sql, "scalar"
    if sql == "FLOAT[]" and getattr(bare, "__name__", "") == "ndarray":
        return sql, "vector"
    raise TypeError(f"{where}: {bare} is not stored as {sql}")


@functools.cache
def fields(record: type) -> tuple[Field, ...]:
    """The stored fields of `record`, in declaration order."""
    hints = typing.get_type_hints(record, include_extras=True)
    if isinstance(record, type) and issubclass(record, msgspec.Struct):
        info = msgspec.structs.fields(record)
        declared = [(f.name, f.default if f.default is not msgspec.NODEFAULT else
                     (f.default_factory() if f.default_factory is not msgspec.NODEFAULT else msgspec.NODEFAULT))
                    for f in info]
    elif dataclasses.is_dataclass(record):
        declared = [(f.name, f.default if f.default is not dataclasses.MISSING else
                     (f.default_factory() if f.default_factory is not dataclasses.MISSING else msgspec.NODEFAULT))
                    for f in dataclasses.fields(record)]
    else:
        raise TypeError(f"{record} is neither a msgspec Struct nor a dataclass")
    out: list[Field] = []
    for name, default in declared:
        bare, column, nullable = _resolve(hints[name])
        if not column.stored:
            continue
        if column.flatten:
            out += [msgspec.structs.replace(f, attr=f"{name}.{f.attr}") for f in fields(bare)]
            continue
        if column.timestamp:
            if bare is not int:
                raise TypeError(f"{record.__name__}.{name}: a timestamp column holds int microseconds")
            sql, kind = "TIMESTAMP WITH TIME ZONE", "scalar"
        elif column.json:
            if bare != tuple[tuple[str, str], ...]:
                raise TypeError(f"{record.__name__}.{name}: a JSON column holds tuple[tuple[str, str], ...] pairs")
            sql, kind = "VARCHAR", "json"
        elif column.sql is not None:
            sql, kind = _narrowed(bare, column.sql, f"{record.__name__}.{name}")
        else:
            sql, kind = _sql_type(bare, f"{record.__name__}.{name}")
        out.append(Field(name, column.name or name, sql, kind, column.timestamp, nullable, default, column.required))
    return tuple(out)


def column_names(record: type) -> tuple[str, ...]:
    return tuple(f.column for f in fields(record))


def _nested(record: type) -> dict[str, type]:
    """The flattened fields of `record`: attribute -> the record type it holds."""
    hints = typing.get_type_hints(record, include_extras=True)
    return {f.attr.split(".", 1)[0]: _resolve(hints[f.attr.split(".", 1)[0]])[0]
            for f in fields(record) if "." in f.attr}


def _get(item: Any, attr: str) -> Any:
    for part in attr.split("."):
        item = getattr(item, part)
    return item


def _arrow_type(f: Field) -> Any:
    import pyarrow as pa

    if f.timestamp:
        return pa.timestamp("us", tz="UTC")
    scalar = {"VARCHAR": pa.string(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(), "BOOLEAN": pa.bool_(),
              "INTEGER": pa.int32(), "FLOAT": pa.float32()}
    if f.sql.endswith("[]"):
        return pa.list_(scalar[f.sql[:-2]])
    return scalar[f.sql]


def arrow_schema(record: type, *, before: Sequence[tuple[str, Any]] = ()) -> Any:
    """The Arrow schema of `record`'s table (`before`: (name, arrow type) columns the table adds in front)."""
    import pyarrow as pa

    return pa.schema([*before, *((f.column, _arrow_type(f)) for f in fields(record))])


def laid_out(record: type, order: Sequence[str], added: dict[str, str] | None = None) -> tuple[Field, ...]:
    """The columns of a table that lays `record` out in an order of its own (a file format's): each name in `order`
    is a column of `record`'s, typed by the declaration, or one of `added` (column -> SQL type), a value the table
    computes from the record. A name in neither is an error here, when the layout is built (at import)."""
    declared = {f.column: f for f in fields(record)}
    out = []
    for name in order:
        if name in declared:
            out.append(declared[name])
        elif added is not None and name in added:
            out.append(Field(name, name, added[name], "scalar", False, True, msgspec.NODEFAULT))
        else:
            raise KeyError(f"{record.__name__} has no column {name!r}, and the layout does not add it")
    return tuple(out)


def layout_ddl(table: str, layout: Sequence[Field], key: str = "") -> str:
    """CREATE TABLE for a `laid_out` table."""
    cols = ", ".join(f"{f.column} {f.sql}{' NOT NULL' if f.required else ''}" for f in layout)
    return f"CREATE TABLE {table} ({cols}{', ' + key if key else ''})"


def layout_schema(layout: Sequence[Field]) -> Any:
    """The Arrow schema of a `laid_out` table."""
    import pyarrow as pa

    return pa.schema([(f.column, _arrow_type(f)) for f in layout])


def ddl(table: str, record: type, key: str = "", *, before: Sequence[tuple[str, str]] = (),
        after: Sequence[tuple[str, str]] = ()) -> str:
    """CREATE TABLE IF NOT EXISTS for `record` (`before`, `after`: (name, SQL type) columns the table adds in front
    and behind; `key`: a constraint)."""
    cols = ", ".join([*(f"{n} {t}" for n, t in before),
                      *(f"{f.column} {f.sql}{' NOT NULL' if f.required else ''}" for f in fields(record)),
                      *(f"{n} {t}" for n, t in after)])
    return f"CREATE TABLE IF NOT EXISTS {table} ({cols}{', ' + key if key else ''})"


def _stored(f: Field, value: Any) -> Any:
    if f.kind == "json":
        return json.dumps(dict(value), sort_keys=True) if value else None
    if f.kind == "set":
        return sorted(value)
    if f.kind == "tuple":
        return list(value)
    if f.kind == "vector":
        return value.tolist()
    return value


@functools.cache
def _columns_of(record: type) -> tuple[tuple[Any, Field | None, Any], ...]:
    """Per stored field of `record`, what `arrow_table` builds its column with: a getter of the attribute (dotted
    for a flattened field; `operator.attrgetter` walks it in C), the field when its value is converted on the way
    (None: stored as it is, a scalar) and the Arrow type. Derived once per record type: a checkpoint of the trace
    projection builds thousands of cells, and resolving each cell's attribute path and kind again was a tenth of the
    shard's CPU during an ingest (bench/ingest.py)."""
    return tuple((operator.attrgetter(f.attr), None if f.kind == "scalar" else f, _arrow_type(f)) for f in fields(record))


def arrow_table(record: type, records: Iterable[Any], *, before: Sequence[tuple[str, Any, Sequence[Any]]] = (),
                after: Sequence[tuple[str, Any, Sequence[Any]]] = ()) -> Any:
    """`records` as an Arrow table of `record`'s schema, column by column by attribute name (`before`, `after`:
    (name, arrow type, values) columns in front and behind)."""
    import pyarrow as pa

    items = list(records)
    arrays = [pa.array(list(values), type=typ) for _, typ, values in before]
    for get, converted, typ in _columns_of(record):
        values = list(map(get, items))
        if converted is not None:
            values = [_stored(converted, v) for v in values]
        arrays.append(pa.array(values, type=typ))
    arrays += [pa.array(list(values), type=typ) for _, typ, values in after]
    schema = arrow_schema(record, before=[(n, t) for n, t, _ in before])
    for name, typ, _ in after:
        schema = schema.append(pa.field(name, typ))
    return pa.Table.from_arrays(arrays, schema=schema)


def insert_arrow(db: duckdb.DuckDBPyConnection, table: str, arrow: pa.Table, *, or_replace: bool = False) -> None:
    """Insert the rows of `arrow` into `table`, column by column by name (`or_replace`: `INSERT OR REPLACE`, a row
    replacing the one of its primary key). No rows: nothing is run."""
    if not arrow.num_rows:
        return
    columns = ", ".join(arrow.schema.names)
    # The batch found by name in this frame (DuckDB's replacement scan of Python objects), not registered and
    # unregistered: one call into DuckDB instead of three (each some 0.3-1 ms of CPU in a projection's checkpoint).
    _engram_rows = arrow  # noqa: F841  (read by DuckDB, by its name)
    db.execute(f"INSERT {'OR REPLACE ' if or_replace else ''}INTO {table} ({columns}) SELECT {columns} FROM _engram_rows")


def key_table(keys: Mapping[str, Sequence[str]]) -> "pa.Table":
    """`keys` (column name -> values, one list per column, of equal lengths; string columns) as an Arrow table, to
    join a table's rows with in one statement (`delete_keys`, a checkpoint's reads of many discussions)."""
    import pyarrow as pa

    return pa.table({n: pa.array(list(values), pa.string()) for n, values in keys.items()})


def delete_keys(db: duckdb.DuckDBPyConnection, table: str, keys: Mapping[str, Sequence[str]]) -> None:
    """Delete the rows of `table` whose columns equal one of `keys`' rows (see `key_table`). One statement for every
    key, whatever their number: a checkpoint deletes what its agents and discussions changed in one scan of the
    table, not one per agent (issue 27). No keys: nothing is run."""
    names = list(keys)
    if not names or not len(keys[names[0]]):
        return
    _engram_keys = key_table(keys)  # noqa: F841  (read by DuckDB, by its name)
    on = " AND ".join(f"{table}.{n} = _engram_keys.{n}" for n in names)
    db.execute(f"DELETE FROM {table} USING _engram_keys WHERE {on}")


def stored_values(record: type, item: Any) -> dict[str, Any]:
    """`item`'s stored fields as its table holds them, by column name (for a row that adds columns of its own)."""
    return {f.column: _stored(f, _get(item, f.attr)) for f in fields(record)}


def select_list(record: type, prefix: str = "") -> str:
    """The columns of `record` for reading it back: timestamps as epoch microseconds, named as their column."""
    return ", ".join(f"epoch_us({prefix}{f.column}) AS {f.column}" if f.timestamp else f"{prefix}{f.column}"
                     for f in fields(record))


def _read(f: Field, value: Any) -> Any:
    if value is None:
        if f.nullable:
            return None
        if f.default is not msgspec.NODEFAULT:  # a column added to the table after the row was written
            return f.default
        return value
    if f.kind == "tuple":
        return tuple(value)
    if f.kind == "json":
        return tuple(sorted(json.loads(value).items()))
    if f.kind == "set":
        return set(value)
    if f.kind == "list":
        return list(value)
    if f.kind == "vector":
        import numpy as np

        return np.asarray(value, dtype=np.float32)
    return value


def from_rows(record: type, names: Sequence[str], rows: Iterable[Sequence[Any]], **extra: Any) -> list[Any]:
    """Records built from SQL rows by column name (`names`: the cursor's column names, `select_list` order or any
    other); columns that are not the record's are ignored, `extra` fills fields that are not stored."""
    by_column = {f.column: f for f in fields(record)}
    at = [(i, by_column[n]) for i, n in enumerate(names) if n in by_column]
    missing = set(by_column) - {f.column for _, f in at}
    if missing:
        raise ValueError(f"{record.__name__} read back without columns {sorted(missing)}")
    nested = _nested(record)
    if not nested:
        return [record(**{f.attr: _read(f, row[i]) for i, f in at}, **extra) for row in rows]
    out = []
    for row in rows:
        values: dict[str, Any] = {}
        inner: dict[str, dict[str, Any]] = {name: {} for name in nested}
        for i, f in at:
            outer, _, attr = f.attr.partition(".")
            if attr:
                inner[outer][attr] = _read(f, row[i])
            else:
                values[outer] = _read(f, row[i])
        out.append(record(**values, **{name: nested[name](**kw) for name, kw in inner.items()}, **extra))
    return out


def columns(record: type, *items: str) -> str:
    """A SQL select list over `record`'s table: each item a column name or `expression AS alias`. A name that is
    not one of its columns, or an expression that reads none of them, raises here (at import, where the list is
    built), not when a user's query runs."""
    known = set(column_names(record))
    for item in items:
        expression, _, alias = item.rpartition(" AS ")
        if not alias or not expression:
            if item not in known:
                raise ValueError(f"{record.__name__} has no column {item!r} (it has {sorted(known)})")
        elif not any(_mentions(expression, c) for c in known):
            raise ValueError(f"{record.__name__}: {item!r} reads none of its columns")
    return ", ".join(items)


def _mentions(expression: str, column: str) -> bool:
    import re

    return re.search(rf"(?<!\w){re.escape(column)}(?!\w)", expression) is not None

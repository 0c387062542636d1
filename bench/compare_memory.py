"""Do two engram homes hold the same memory? Compares their projection tables row by row; prints one JSON object.

    .venv/bin/python bench/compare_memory.py HOME_A HOME_B [--strict] [--show N] [--files]

For checking that a performance change leaves what is remembered unchanged: ingest the same data with
two builds (e.g. `bench/ingest.py --home A` on each), then compare. Compared, per table: the cognitive
memory (`memory_traces`, `trace_edges`, `trace_changes`), the discussion memories (`vector_memories`,
`discussion_memories`, `discussion_summaries`, the memory files), observations and reflections, and working
memory, as multisets of rows.

Log positions are left out unless `--strict`: the columns that hold the seq of an event a policy appended
(`last_seq`, `created_seq`, `updated_seq`, trace_changes' `seq`, working memory's `as_of_seq`, an observation
note's `recorded_seq`, `activated_seq` and `reflected_seq`; also as keys of
JSON text, e.g. a memory file's lines) depend on how concurrent policy actors'
appends interleave, which differs from run to run of the same build; the positions of the messages
(`source_seqs`, and the trace ids made from them) do not, and are compared. Exit status 0 when every
compared table is identical, 1 otherwise.

When the two builds' tables differ in columns (a build added one), the rows are compared on the columns both have,
and the columns only one has are listed. `--files` reads each home's projection databases as they are (read-only
DuckDB), without opening the home with this build: a home whose projection version this build does not have would
otherwise be folded again (its tables dropped) on opening. Tables over files (the memory files) are not compared
then.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.boot.embedded import Engram  # noqa: E402

TABLES = (
    "memory_traces", "trace_edges", "trace_changes",
    "vector_memories", "discussion_memories", "discussion_summaries",
    "observation_notes", "observation_logs", "reflections", "reflection_traces",
    "working_memory", "working_memory_state", "discussion_memory_files",
)
# Positions of events appended by policies: they interleave differently from run to run (see the docstring).
# An observation note's `recorded_seq`, `activated_seq` and `reflected_seq` are the seqs of the observer's and the
# reflector's own events (two runs of one build, LoCoMo dev: 247 of 276 notes differed in `recorded_seq` alone).
RUN_DEPENDENT = {"last_seq", "created_seq", "updated_seq", "seq", "recorded_at", "as_of_seq", "slots_seq",
                 "recorded_seq", "activated_seq", "reflected_seq"}


def _freeze(value):
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _without_positions(value):
    """A JSON object in a text column (e.g. a memory file's line) without its run-dependent keys."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            data = json.loads(value)
        except ValueError:
            return value
        if isinstance(data, dict):
            return json.dumps({k: v for k, v in data.items() if k not in RUN_DEPENDENT}, sort_keys=True)
    return value


def columns_of(sql, table: str) -> list[str] | None:
    try:
        columns, _ = sql(f"SELECT * FROM {table} LIMIT 0")
    except Exception:  # noqa: BLE001 - a table this build does not have
        return None
    return list(columns)


def table_rows(sql, table: str, columns: list[str], strict: bool) -> tuple[list[str], Counter]:
    kept = [c for c in columns if strict or c not in RUN_DEPENDENT]
    _, rows = sql(f"SELECT {', '.join(kept)} FROM {table}")
    if not strict:
        rows = [[_without_positions(v) for v in r] for r in rows]
    return kept, Counter(_freeze(list(r)) for r in rows)


class _Files:
    """A home's projection databases, read as they are (read-only): one shard's tables, or their union."""

    def __init__(self, home: Path):
        import duckdb

        self.con = duckdb.connect()
        self.shards = sorted((home / "projections").glob("shard-*.duckdb"))
        for i, path in enumerate(self.shards):
            self.con.execute(f"ATTACH '{path}' AS s{i} (READ_ONLY)")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.con.close()

    def sql(self, query: str):
        for table in TABLES:  # FROM t -> the union of the shards' t
            if f"FROM {table}" in query:
                union = " UNION ALL ".join(f"SELECT * FROM s{i}.{table}" for i in range(len(self.shards)))
                query = query.replace(f"FROM {table}", f"FROM ({union})")
        cur = self.con.execute(query)
        return [d[0] for d in cur.description], cur.fetchall()


def compare(home_a: Path, home_b: Path, strict: bool = False, show: int = 3, files: bool = False) -> dict:
    out: dict = {"a": str(home_a), "b": str(home_b), "strict": strict, "tables": {}}
    if files:
        opened = _Files(home_a), _Files(home_b)
    else:
        opened = (Engram.open(home_a, runtime="inprocess", auto_settle=False),
                  Engram.open(home_b, runtime="inprocess", auto_settle=False))
    with opened[0] as a, opened[1] as b:
        sql_a, sql_b = (a.sql, b.sql) if files else (a.rt.sql, b.rt.sql)
        for table in TABLES:
            ca, cb = columns_of(sql_a, table), columns_of(sql_b, table)
            if ca is None or cb is None:
                out["tables"][table] = {"compared": False, "in_a": ca is not None, "in_b": cb is not None}
                continue
            common = [c for c in ca if c in cb]
            cols_a, rows_a = table_rows(sql_a, table, common, strict)
            _, rows_b = table_rows(sql_b, table, common, strict)
            only_a, only_b = rows_a - rows_b, rows_b - rows_a
            entry = {"rows_a": sum(rows_a.values()), "rows_b": sum(rows_b.values()),
                     "only_in_a": sum(only_a.values()), "only_in_b": sum(only_b.values())}
            if ca != cb:
                entry["columns_only_in_a"] = [c for c in ca if c not in cb]
                entry["columns_only_in_b"] = [c for c in cb if c not in ca]
            if only_a or only_b:
                entry["columns"] = cols_a
                entry["examples_only_in_a"] = [list(r) for r in list(only_a)[:show]]
                entry["examples_only_in_b"] = [list(r) for r in list(only_b)[:show]]
            out["tables"][table] = entry
    # A table neither home has (e.g. of a projection this build does not run) is no difference.
    out["identical"] = all((t.get("compared", True) or (not t.get("in_a", True) and not t.get("in_b", True)))
                           and not t.get("only_in_a") and not t.get("only_in_b") for t in out["tables"].values())
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home_a")
    parser.add_argument("home_b")
    parser.add_argument("--strict", action="store_true", help="compare the run-dependent log positions too")
    parser.add_argument("--show", type=int, default=3, help="differing rows shown per table and side")
    parser.add_argument("--files", action="store_true",
                        help="read the projection databases as they are, without opening the homes with this build")
    args = parser.parse_args(argv)
    report = compare(Path(args.home_a), Path(args.home_b), args.strict, args.show, args.files)
    print(json.dumps(report, indent=1, default=str))
    return 0 if report["identical"] else 1


if __name__ == "__main__":
    sys.exit(main())

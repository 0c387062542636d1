"""`engram traces --agent A`: an agent's memory traces (the `memory_traces` projection)."""

from __future__ import annotations

import duckdb

from engram.cli.common import config_from, joined_address, open_engram, print_rows, readonly_session
from engram.cli.main import UsageError
from engram.ids import validate_agent

COLUMNS = (
    "trace_id, trace_type, category, scope, round(importance, 2) AS importance, round(encoding_strength, 3) AS s0, "
    "round(stability_s / 3600, 2) AS stability_h, retrieval_count AS retrievals, verification_count AS verified, "
    "strftime(encoded_at, '%Y-%m-%d %H:%M') AS encoded, active, content"
)


def register(sub) -> None:
    p = sub.add_parser("traces", help="list an agent's memory traces")
    p.add_argument("--agent", default="default")
    p.add_argument("--all", action="store_true", help="include soft-deleted (pruned, superseded) traces")
    p.add_argument("--limit", type=int, default=None)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", dest="fmt", action="store_const", const="json")
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv")
    p.set_defaults(func=run, fmt="table")


def query(agent: str, include_inactive: bool, limit: int | None) -> tuple[str, list]:
    sql = f"SELECT {COLUMNS} FROM memory_traces WHERE agent = ?" + ("" if include_inactive else " AND active")
    sql += " ORDER BY encoded_at, last_seq, trace_id" + (f" LIMIT {int(limit)}" if limit else "")
    return sql, [agent]


def run_sql(args, sql: str, params: list) -> tuple[list[str], list[tuple]]:
    """SQL over the live instance when one runs, else over the files (nothing started)."""
    config = config_from(args)
    if joined_address(args, config):
        with open_engram(args, config) as mem:
            return mem.sql(sql, params)
    try:
        con = readonly_session(config)
        res = con.execute(sql, params)
        return [d[0] for d in res.description], res.fetchall()
    except duckdb.CatalogException:
        return [], []  # no projections yet: nothing was remembered
    except duckdb.IOException as exc:
        raise UsageError(f"{exc}\n(is another engram process writing this home? start `engram serve` to share it)") from None


def run(args) -> int:
    validate_agent(args.agent)
    names, rows = run_sql(args, *query(args.agent, args.all, args.limit))
    if not names:
        print(f"no traces for agent {args.agent}")
        return 0
    print_rows(names, rows, args.fmt)
    return 0

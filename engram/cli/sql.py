"""`engram sql "SELECT …"`: plain SQL over the log and every projection."""

from __future__ import annotations

import duckdb

import sys

from engram.cli.common import config_from, joined_address, open_engram, print_rows
from engram.cli.errors import UsageError
from engram.home import Home, ProjectionPaths
from engram.sql import HomeFiles, run_readonly


def home_files(config) -> HomeFiles:
    home = Home(config.home, config.shards)
    return HomeFiles({s: home.log_path(s) for s in range(config.shards)}, ProjectionPaths(home.projections_dir))


def register(sub) -> None:
    p = sub.add_parser(
        "sql",
        help="run SQL over the log and projections",
        description="Views: events (envelope + payload columns), ev_<event_type>, messages, and every projection "
        "table and file (e.g. discussions). Example: engram sql \"SELECT role, content FROM messages LIMIT 5\"",
    )
    p.add_argument("query")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", dest="fmt", action="store_const", const="json")
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv")
    p.set_defaults(func=run, fmt="table")


def run(args) -> int:
    from engram.sql import SqlError, check_statement

    config = config_from(args)
    try:
        check_statement(args.query)  # refused before anything starts
        if joined_address(args, config):
            with open_engram(args, config) as mem:
                result = mem.sql_result(args.query)
        else:
            result = run_readonly(args.query, home_files(config))
    except SqlError as exc:
        raise UsageError(str(exc)) from None
    except duckdb.IOException as exc:
        raise UsageError(f"{exc}\n(is another engram process writing this home? start `engram serve` to share it)") from None
    print_rows(result.columns, result.rows, args.fmt)
    if result.truncated:
        print(f"(only the first {len(result.rows)} rows are shown)", file=sys.stderr)
    return 0

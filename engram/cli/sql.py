"""`engram sql "SELECT …"`: plain SQL over the log and every projection."""

from __future__ import annotations

import duckdb

from engram.cli.common import config_from, joined_address, open_engram, print_rows, readonly_session
from engram.cli.errors import UsageError


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
    config = config_from(args)
    if joined_address(args, config):
        with open_engram(args, config) as mem:
            names, rows = mem.sql(args.query)
    else:
        try:
            con = readonly_session(config)
            res = con.execute(args.query)
            names = [d[0] for d in res.description] if res.description else []
            rows = res.fetchall()
        except duckdb.IOException as exc:
            raise UsageError(f"{exc}\n(is another engram process writing this home? start `engram serve` to share it)") from None
        except duckdb.Error as exc:
            raise UsageError(str(exc)) from None
    print_rows(names, rows, args.fmt)
    return 0

"""`engram sql "SELECT …"`: read-only SQL over the log and every projection (through the home's server)."""

from __future__ import annotations

import sys

from engram.cli.common import client, print_rows, row_formats


def register(sub) -> None:
    p = sub.add_parser(
        "sql",
        help="run read-only SQL over the log and projections",
        description="Views: events (envelope + payload columns), ev_<event_type>, messages, and every projection "
        "table and file (e.g. discussions). One read-only statement (SELECT, DESCRIBE, SHOW, EXPLAIN), confined: no "
        "file, network or extension access; stopped after 30 s; at most 10,000 rows. "
        "Example: engram sql \"SELECT role, content FROM messages LIMIT 5\"",
    )
    p.add_argument("query")
    row_formats(p)
    p.set_defaults(func=run)


def run(args) -> int:
    with client(args) as mem:
        res = mem.sql(args.query)
    print_rows(res.columns, res.rows, args.fmt)
    if res.truncated:
        print(f"engram: only the first {len(res.rows)} rows are shown", file=sys.stderr)
    return 0

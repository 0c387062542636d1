"""`engram traces --agent A`: an agent's memory traces (the `memory_traces` projection)."""

from __future__ import annotations

from engram.api.types import MAX_ROWS as MAX
from engram.cli.common import client, count, print_table, row_formats
from engram.kernel.ids import validate_agent


def register(sub) -> None:
    p = sub.add_parser("traces", help="list an agent's memory traces")
    p.add_argument("--agent", default="default")
    p.add_argument("--all", action="store_true", help="include soft-deleted (pruned, superseded) traces")
    p.add_argument("--limit", type=count(MAX), default=None)
    row_formats(p)
    p.set_defaults(func=run)


def run(args) -> int:
    validate_agent(args.agent)
    with client(args) as mem:
        table = mem.traces(args.agent, include_inactive=args.all, limit=args.limit)
    if not table.columns:
        print(f"no traces for agent {args.agent}")
        return 0
    print_table(table, args.fmt)
    return 0

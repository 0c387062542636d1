"""`engram consolidations --agent A`: what each consolidation run did (the `ConsolidationRan` events).

One row per run at a clock tick (event time): traces looked at, then per step the traces pruned by the
decay sweep, co-activation edges, schemas, conflicts resolved and spaced-repetition reviews; the steps
that stopped at the run's bound; the run's duration. Runs that changed nothing are counted, not listed,
unless `--all`.
"""

from __future__ import annotations

from engram.cli.common import print_rows
from engram.cli.traces import run_sql
from engram.ids import validate_agent

COLUMNS = (
    "strftime(ts, '%Y-%m-%d %H:%M') AS tick, traces, pruned, edges, schemas, conflicts, reinforced, "
    "array_to_string(CAST(bounded AS VARCHAR[]), ',') AS bounded, round(duration_ms, 2) AS ms"
)
BUSY = "(pruned + edges + schemas + conflicts + reinforced) > 0"


def register(sub) -> None:
    p = sub.add_parser("consolidations", help="what each consolidation run of an agent did")
    p.add_argument("--agent", default="default")
    p.add_argument("--all", action="store_true", help="list idle runs too")
    p.add_argument("--limit", type=int, default=50, help="the latest N runs (default 50)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", dest="fmt", action="store_const", const="json")
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv")
    p.set_defaults(func=run, fmt="table")


def run(args) -> int:
    agent = validate_agent(args.agent)
    where = "agent = ?" + ("" if args.all else f" AND {BUSY}")
    sql = (f"SELECT * FROM (SELECT seq, {COLUMNS} FROM ev_consolidation_ran WHERE {where} ORDER BY seq DESC "
           f"LIMIT {int(args.limit)}) ORDER BY seq")
    names, rows = run_sql(args, sql, [agent])
    _, totals = run_sql(args, "SELECT count(*), count(*) FILTER (WHERE " + BUSY + "), sum(pruned), sum(edges), "
                        "sum(schemas), sum(conflicts), sum(reinforced), round(avg(duration_ms), 2) "
                        "FROM ev_consolidation_ran WHERE agent = ?", [agent])
    if not totals or not totals[0][0]:
        print(f"no consolidation runs for agent {agent} yet (one per clock tick, hourly in event time)")
        return 0
    print_rows(names[1:], [r[1:] for r in rows], args.fmt)
    if args.fmt == "table":
        n, busy, pruned, edges, schemas, conflicts, reinforced, avg_ms = totals[0]
        print(f"{n} runs ({n - busy} changed nothing): {pruned} pruned, {edges} edges, {schemas} schemas, "
              f"{conflicts} conflicts resolved, {reinforced} reviews; {avg_ms} ms per run on average")
    return 0

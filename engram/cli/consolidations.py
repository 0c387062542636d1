"""`engram consolidations --agent A`: what each consolidation run did (the `ConsolidationRan` events).

A run happens at a clock tick (event time: the agent's time advancing past a boundary of
`memory.consolidation.intervalHours`) and covers all the time since the previous run: everything that fell
due at each boundary in between, each at its own boundary. Only boundaries with work are recorded (the
`boundaries` a run counts); idle boundaries cost nothing and leave no trace. One row per run: traces looked
at, then per step the traces pruned by the decay sweep, co-activation edges, schemas, conflicts resolved and
spaced-repetition reviews; the steps that stopped at the run's bound; the run's duration. Runs that changed
nothing are counted, not listed, unless `--all`.
"""

from __future__ import annotations

from engram.api.types import MAX_ROWS as MAX
from engram.cli.common import client, count, print_table, row_formats
from engram.kernel.ids import validate_agent


def register(sub) -> None:
    p = sub.add_parser(
        "consolidations", help="what each consolidation run of an agent did",
        description="A run happens at a clock tick and covers all the time since the previous run: whatever fell due "
        "at each memory.consolidation.intervalHours boundary in between, each at its own boundary. Only boundaries "
        "with work are recorded; idle ones cost nothing. One row per run (runs that changed nothing only with --all).")
    p.add_argument("--agent", default="default")
    p.add_argument("--all", action="store_true", help="list idle runs too")
    p.add_argument("--limit", type=count(MAX), default=50, help="the latest N runs (default 50)")
    row_formats(p)
    p.set_defaults(func=run)


def run(args) -> int:
    agent = validate_agent(args.agent)
    with client(args) as mem:
        res = mem.consolidations(agent, include_idle=args.all, limit=args.limit)
    totals = res.totals
    if not totals.get("runs"):
        print(f"no consolidation runs for agent {agent} yet: a run happens when the agent's time (event time) passes a "
              "memory.consolidation.intervalHours boundary, and covers all the time since the previous run; only "
              "boundaries with work are recorded")
        return 0
    print_table(res.runs, args.fmt)
    if args.fmt == "table":
        n, busy = totals["runs"], totals["busy"]
        print(f"{n} runs ({n - busy} changed nothing): {totals['pruned']} pruned, {totals['edges']} edges, "
              f"{totals['schemas']} schemas, {totals['conflicts']} conflicts resolved, {totals['reinforced']} reviews; "
              f"{totals['avg_ms']} ms per run on average")
    return 0

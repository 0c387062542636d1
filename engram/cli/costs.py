"""`engram costs [AGENT]`: what the memory tasks' LLM calls cost, per agent, endpoint and model (the `llm_costs` SQL
view, through the home's server). A server the user runs costs nothing and says "local"."""

from __future__ import annotations

from engram.cli.common import client, print_rows, row_formats

QUERY = "SELECT * FROM llm_costs"


def register(sub) -> None:
    p = sub.add_parser(
        "costs",
        help="what the LLM calls cost, per agent, endpoint and model",
        description="The llm_costs view (engram sql \"SELECT * FROM llm_costs\"): calls, failed calls, tokens, dollars "
        "at list price, and cost: \"local\" for an endpoint you run (cost 0), \"offline\" for the labelled heuristic.",
    )
    p.add_argument("agent", nargs="?", help="one agent (default: every agent the key may see)")
    row_formats(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from engram.kernel.ids import validate_agent

    with client(args) as mem:
        res = mem.sql(QUERY) if args.agent is None else mem.sql(f"{QUERY} WHERE agent = ?", [validate_agent(args.agent)])
    print_rows(res.columns, res.rows, args.fmt)
    return 0

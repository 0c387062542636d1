"""`engram context --discussion D`: the context that would be sent to the model now.

Blocks in order (engram.context.assemble): working memory, rolling summary, compaction chain, recalled
memories (for the latest user message, or --query), then the recent raw turns; each with its tokens and
budget. Recall needs the trace readers: without `--no-recall` this starts engram (or joins `engram serve`).
"""

from __future__ import annotations

import json

from engram.cli.common import config_from, joined_address, open_engram
from engram.cli.main import UsageError
from engram.cli.traces import run_sql
from engram.ids import validate_discussion


def register(sub) -> None:
    p = sub.add_parser("context", help="print the context that would be sent to the model now (infinite context)")
    p.add_argument("--discussion", required=True)
    p.add_argument("--agent", help="the agent the discussion belongs to (default: found from the log)")
    p.add_argument("--query", help="recall for this text (default: the latest user message)")
    p.add_argument("--no-recall", dest="recall", action="store_false",
                   help="leave recalled memories out (reads the files; starts nothing)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from engram.context_api import ContextMemory, build_context, discussion_agent
    from engram.home import Home, ProjectionPaths

    validate_discussion(args.discussion)
    config = config_from(args)
    if args.recall or joined_address(args, config):
        with open_engram(args, config) as mem:
            try:
                assembled = ContextMemory(mem).context(args.discussion, agent=args.agent, query=args.query,
                                                       recall=args.recall)
            except LookupError as exc:
                raise UsageError(str(exc)) from None
    else:
        sql = lambda q, params: run_sql(args, q, params)
        agent = discussion_agent(sql, args.discussion, args.agent)
        if agent is None:
            raise UsageError(f"discussion {args.discussion!r} has no messages")
        home = Home(config.home, config.shards)
        assembled = build_context(sql, home, ProjectionPaths(home.projections_dir), agent, args.discussion,
                                  query=args.query)
    if args.json:
        print(json.dumps(assembled.as_json(), indent=1, ensure_ascii=False))
    else:
        print(assembled.render())
    return 0

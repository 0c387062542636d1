"""`engram context --discussion D`: the context that would be sent to the model now.

Blocks in order (engram.memory.context.assemble): working memory, rolling summary, compaction chain, recalled
memories (for the latest user message, or --query), then the recent raw turns; each with its tokens and
budget.
"""

from __future__ import annotations

import json

from engram.cli.common import client, discussion_agent
from engram.kernel.ids import validate_discussion


def register(sub) -> None:
    p = sub.add_parser("context", help="print the context that would be sent to the model now (infinite context)")
    p.add_argument("--discussion", required=True)
    p.add_argument("--agent", help="the agent the discussion belongs to (default: found from the log)")
    p.add_argument("--query", help="recall for this text (default: the latest user message)")
    p.add_argument("--no-recall", dest="recall", action="store_false", help="leave recalled memories out")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    validate_discussion(args.discussion)
    with client(args) as mem:
        res = mem.context(discussion_agent(mem, args.discussion, args.agent), args.discussion, query=args.query,
                          recall=args.recall)
    print(json.dumps(res.context, indent=1, ensure_ascii=False) if args.json else res.rendered)
    return 0

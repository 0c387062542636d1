"""`engram search "a;b;c" --discussion ID`: VectorMemorySearch over `<id>_vector_memory.db`."""

from __future__ import annotations

import json
import sys

from engram.cli.common import client, discussion_agent
from engram.cli.errors import UsageError
from engram.kernel.ids import validate_discussion

MODES = ("keyword", "semantic", "hybrid")
DEFAULT_LIMIT = 5  # engram.config.defaults.VECTOR_SEARCH_LIMIT (the server checks the range)


def register(sub) -> None:
    p = sub.add_parser("search", help="search a discussion's vector memory (VectorMemorySearch)")
    p.add_argument("keywords", metavar="KEYWORDS", help='keywords separated by ";" (OR logic, at most 60)')
    p.add_argument("--discussion", required=True, metavar="ID")
    p.add_argument("--agent", help="the agent the discussion belongs to (default: found from the log)")
    p.add_argument("--mode", choices=MODES, default="hybrid", help="default: hybrid")
    p.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"results (default {DEFAULT_LIMIT})")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    validate_discussion(args.discussion)
    if args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    with client(args) as mem:
        agent = discussion_agent(mem, args.discussion, args.agent)
        res = mem.search(agent, args.discussion, args.keywords, mode=args.mode, limit=args.limit)
    if args.json:
        from engram.cli.common import to_json

        doc = json.loads(to_json(res))
        doc.pop("agent", None)
        print(json.dumps(doc, ensure_ascii=False, indent=1))
        return 0
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if not res.hits:
        print(res.reason)
        return 0
    print(f"{len(res.hits)} result(s) for {'; '.join(res.keywords)} ({res.mode}, {res.ms:.1f} ms)")
    for h in res.hits:
        ranks = ", ".join(x for x in (f"keyword #{h['keyword_rank']}" if h.get("keyword_rank") else "",
                                       f"semantic #{h['semantic_rank']}" if h.get("semantic_rank") else "") if x)
        ids = h["message_ids"]
        print(f"\n{h['rank']}. {h['title']}  [{h['memory_id']}; score {h['score']:.4f}{'; ' + ranks if ranks else ''}]")
        print(f"   messages {ids[0]} .. {ids[-1]} ({len(ids)}), seq {h['first_seq']}-{h['last_seq']}")
        print(f"   {h['summary']}")
        if h.get("entities"):
            print(f"   entities: {', '.join(h['entities'])}")
    return 0

"""`engram summary show ID`: the rolling summary of `<id>_summary.jsonl`."""

from __future__ import annotations

import json

import msgspec

from engram.cli.common import client, discussion_agent
from engram.kernel.ids import validate_discussion


def register(sub) -> None:
    p = sub.add_parser("summary", help="show a discussion's rolling summary (<id>_summary.jsonl)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="print the rolling summary of a discussion")
    show.add_argument("discussion", metavar="ID")
    show.add_argument("--agent", help="the agent the discussion belongs to (default: found from the log)")
    show.add_argument("--json", action="store_true", help="print the file's record as JSON")
    show.set_defaults(func=run_show)


def run_show(args) -> int:
    validate_discussion(args.discussion)
    with client(args) as mem:
        agent = discussion_agent(mem, args.discussion, args.agent)
        res = mem.summary(agent, args.discussion)
    record = res.summary
    if record is None:
        print(f"no rolling summary for discussion {args.discussion!r} yet ({res.path}): it is written when a "
              "workflow runs chatSummarySummarizer or FullChatSummary and enough chunk memories wait")
        return 1
    if args.json:
        print(json.dumps(msgspec.to_builtins(record), ensure_ascii=False, indent=1))
        return 0
    print(res.path)
    print(f"discussion {args.discussion!r}, agent {agent!r}, generation {record.generation}: "
          f"{record.memories_absorbed} chunk memories absorbed, through {record.absorbed_through} "
          f"(messages up to seq {record.absorbed_through_seq}); updated {record.updated_at} "
          f"by {record.llm.provider}/{record.llm.model}")
    print()
    print(record.summary)
    return 0

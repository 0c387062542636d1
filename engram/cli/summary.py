"""`engram summary show ID`: the rolling summary of `<id>_summary.jsonl`, read straight from the file."""

from __future__ import annotations

import json

from engram.cli.common import config_from
from engram.cli.discussion_support import projection_paths, reader_agent
from engram.discussion.files import SUMMARY_SUFFIX, read_summary


def register(sub) -> None:
    p = sub.add_parser("summary", help="show a discussion's rolling summary (<id>_summary.jsonl)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="print the rolling summary of a discussion")
    show.add_argument("discussion", metavar="ID")
    show.add_argument("--agent", help="the agent the discussion belongs to (default: found from the files)")
    show.add_argument("--json", action="store_true", help="print the file's record as JSON")
    show.set_defaults(func=run_show)


def run_show(args) -> int:
    config = config_from(args)
    agent = reader_agent(config, args.discussion, args.agent)
    path = projection_paths(config).discussion_file(agent, args.discussion, SUMMARY_SUFFIX)
    record = read_summary(path)
    if record is None:
        print(f"no rolling summary for discussion {args.discussion!r} yet ({path}): it is written when a "
              "workflow runs chatSummarySummarizer or FullChatSummary and enough chunk memories wait")
        return 1
    if args.json:
        print(json.dumps(record, ensure_ascii=False, indent=1))
        return 0
    print(path)
    print(f"discussion {args.discussion!r}, agent {agent!r}, generation {record['generation']}: "
          f"{record['memories_absorbed']} chunk memories absorbed, through {record['absorbed_through']} "
          f"(messages up to seq {record['absorbed_through_seq']}); updated {record['updated_at']} "
          f"by {record['llm']['provider']}/{record['llm']['model']}")
    print()
    print(record["summary"])
    return 0

"""`engram memories show ID`: the chunk memories of `<id>_memories.jsonl`."""

from __future__ import annotations

import json

import msgspec

from engram.cli.common import client, discussion_agent
from engram.kernel.ids import validate_discussion


def register(sub) -> None:
    p = sub.add_parser("memories", help="show a discussion's chunk memories (<id>_memories.jsonl)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="print the chunk memories of a discussion, oldest first")
    show.add_argument("discussion", metavar="ID")
    show.add_argument("--agent", help="the agent the discussion belongs to (default: found from the log)")
    show.add_argument("--last", type=int, metavar="N", help="only the last N memories")
    show.add_argument("--json", action="store_true", help="print the file's records as a JSON list")
    show.set_defaults(func=run_show)


def run_show(args) -> int:
    validate_discussion(args.discussion)
    with client(args) as mem:
        agent = discussion_agent(mem, args.discussion, args.agent)
        res = mem.memories(agent, args.discussion, last=args.last)
    if not res.exists:
        print(f"no memory file for discussion {args.discussion!r} yet ({res.path}): it is created at the first "
              "memory check, around the 3rd message")
        return 1
    memories, shown = res.memories, res.memories
    if args.json:
        print(json.dumps(msgspec.to_builtins(shown), ensure_ascii=False, indent=1))
        return 0
    print(res.path)
    print(f"discussion {args.discussion!r}, agent {agent!r}: {res.total} chunk memor{'y' if res.total == 1 else 'ies'}"
          + (f" (the last {len(shown)} shown)" if len(shown) < res.total else "")
          + f" covering {sum(m.message_count for m in memories)} messages (~{sum(m.token_count for m in memories)} tokens)")
    for i, m in enumerate(shown, start=res.total - len(shown) + 1):
        print(f"\n#{i} {m.memory_id}  messages {m.first_message_id} .. {m.last_message_id} "
              f"({m.message_count}, seq {m.first_seq}-{m.last_seq}, ~{m.token_count} tokens)  "
              f"{m.first_ts} .. {m.last_ts}")
        print(f"   {m.mode} mode, closed by the {m.trigger} threshold; {m.llm.provider}/{m.llm.model}"
              + (f"; workflow {m.workflow}" if m.workflow else "")
              + (f"; workflow not used: {m.workflow_error}" if m.workflow_error else ""))
        print(f"   {m.summary}")
    return 0

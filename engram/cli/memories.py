"""`engram memories show ID`: the chunk memories of `<id>_memories.jsonl`, read straight from the file."""

from __future__ import annotations

import json

from engram.cli.common import config_from
from engram.cli.discussion_support import projection_paths, reader_agent
from engram.discussion.files import MEMORIES_SUFFIX, read_memories


def register(sub) -> None:
    p = sub.add_parser("memories", help="show a discussion's chunk memories (<id>_memories.jsonl)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    show = verbs.add_parser("show", help="print the chunk memories of a discussion, oldest first")
    show.add_argument("discussion", metavar="ID")
    show.add_argument("--agent", help="the agent the discussion belongs to (default: found from the files)")
    show.add_argument("--last", type=int, metavar="N", help="only the last N memories")
    show.add_argument("--json", action="store_true", help="print the file's records as a JSON list")
    show.set_defaults(func=run_show)


def run_show(args) -> int:
    config = config_from(args)
    agent = reader_agent(config, args.discussion, args.agent)
    path = projection_paths(config).discussion_file(agent, args.discussion, MEMORIES_SUFFIX)
    memories = read_memories(path)
    if memories is None:
        print(f"no memory file for discussion {args.discussion!r} yet ({path}): it is created at the first "
              "memory check, around the 3rd message")
        return 1
    shown = memories[-args.last:] if args.last else memories
    if args.json:
        print(json.dumps(shown, ensure_ascii=False, indent=1))
        return 0
    source = sum(m["token_count"] for m in memories)
    print(f"{path}")
    print(f"discussion {args.discussion!r}, agent {agent!r}: {len(memories)} chunk memor{'y' if len(memories) == 1 else 'ies'}"
          f" covering {sum(m['message_count'] for m in memories)} messages (~{source} tokens)")
    for i, m in enumerate(shown, start=len(memories) - len(shown) + 1):
        print(f"\n#{i} {m['memory_id']}  messages {m['first_message_id']} .. {m['last_message_id']} "
              f"({m['message_count']}, seq {m['first_seq']}-{m['last_seq']}, ~{m['token_count']} tokens)  "
              f"{m['first_ts']} .. {m['last_ts']}")
        print(f"   {m['mode']} mode, closed by the {m['trigger']} threshold; {m['llm']['provider']}/{m['llm']['model']}"
              + (f"; workflow {m['workflow']}" if m.get("workflow") else "")
              + (f"; workflow not used: {m['workflow_error']}" if m.get("workflow_error") else ""))
        print(f"   {m['summary']}")
    return 0

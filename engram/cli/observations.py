"""`engram observations --agent A [--discussion D]`: an agent's observation logs (the Observer and Reflector).

Without `--discussion`: one row per observation log (messages and tokens observed, notes, the
compression, what is active, buffered and reflected). With it: that discussion's log as rendered
(`Date:` headings, bullet notes with nested details), or with `--notes` its notes one per row.
"""

from __future__ import annotations

from engram.cli.common import client, print_table
from engram.ids import validate_agent, validate_discussion


def register(sub) -> None:
    p = sub.add_parser("observations", help="an agent's observation logs (Observer notes, reflections)")
    p.add_argument("--agent", default="default")
    p.add_argument("--discussion", help="print this discussion's observation log")
    p.add_argument("--notes", action="store_true", help="with --discussion: every note, one per row, with its status")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", dest="fmt", action="store_const", const="json")
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv")
    p.set_defaults(func=run, fmt="table")


def run(args) -> int:
    agent = validate_agent(args.agent)
    discussion = validate_discussion(args.discussion) if args.discussion is not None else None
    with client(args) as mem:
        if discussion is None:
            table = mem.observation_logs(agent)
            if not table.rows:
                print(f"no observation logs for agent {agent} yet (the Observer buffers every "
                      "memory.observer.bufferTokens and activates past memory.observer.activationTokens)")
                return 0
            print_table(table, args.fmt)
            return 0
        if args.notes:
            table = mem.observation_notes(agent, discussion)
            print_table(table, args.fmt) if table.rows else print(f"no observation notes for discussion {discussion}")
            return 0
        log = mem.observation_log(agent, discussion)
    if log.markdown is None:
        print(f"no observation log for discussion {discussion} of agent {agent} yet")
        return 0
    print(f"{log.path}:\n")
    print(log.markdown, end="")
    return 0

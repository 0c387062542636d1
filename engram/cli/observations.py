"""`engram observations --agent A [--discussion D]`: an agent's observation logs (the Observer and Reflector).

Without `--discussion`: one row per observation log (messages and tokens observed, notes, the
compression, what is active, buffered and reflected), then one line per log saying how far it is from
the Observer's and the Reflector's thresholds (the agent's `memory.observer.activationTokens` and
`memory.reflector.activationTokens`, as the log folded them). With `--discussion`: that discussion's log
as rendered (`Date:` headings, bullet notes with nested details), or with `--notes` its notes one per row.
"""

from __future__ import annotations

from engram.cli.common import client, print_rows, print_table, row_formats
from engram.kernel.ids import validate_agent, validate_discussion


def register(sub) -> None:
    p = sub.add_parser(
        "observations", help="an agent's observation logs (Observer notes, reflections) and how far each is from activation",
        description="One row per observation log, then per log how many tokens are not yet observed against the "
        "Observer's threshold and how many active note tokens against the Reflector's (what is left to reach each).")
    p.add_argument("--agent", default="default")
    p.add_argument("--discussion", help="print this discussion's observation log")
    p.add_argument("--notes", action="store_true", help="with --discussion: every note, one per row, with its status")
    row_formats(p)
    p.set_defaults(func=run)


# The columns the per-log lines say in words (left out of the printed table; --json and --csv keep them).
PROGRESS = ("unobserved", "tokens_to_observer", "tokens_to_reflector", "observer_threshold", "active_tokens",
            "reflector_threshold")


def progress_line(log: dict) -> str:
    """"discussion conv-26: 18,344 of the Observer's 30,000 tokens not yet observed (11,657 more to activate); active
    notes 0 of the Reflector's 40,000 tokens (40,001 more)" — every number from the log's row."""
    where = f"discussion {log['scope_id']}" if log["scope"] == "discussion" else f"agent {log['scope_id']} (all its discussions)"
    to_observer = (f"{log['tokens_to_observer']:,} more to activate" if log["tokens_to_observer"]
                   else "over it: the Observer activates at the next message")
    to_reflector = (f"{log['tokens_to_reflector']:,} more" if log["tokens_to_reflector"]
                    else "over it: the Reflector runs next")
    return (f"{where}: {log['unobserved']:,} of the Observer's {log['observer_threshold']:,} tokens not yet observed "
            f"({to_observer}); active notes {log['active_tokens']:,} of the Reflector's {log['reflector_threshold']:,} "
            f"tokens ({to_reflector})")


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
            if args.fmt != "table":
                print_table(table, args.fmt)
                return 0
            print_rows([c for c in table.columns if c not in PROGRESS],
                       [[v for c, v in zip(table.columns, r) if c not in PROGRESS] for r in table.rows], "table")
            for row in table.rows:
                print(progress_line(dict(zip(table.columns, row))))
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

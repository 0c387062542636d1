"""`engram observations --agent A [--discussion D]`: an agent's observation logs (the Observer and Reflector).

Without `--discussion`: one row per observation log (messages and tokens observed, notes, the
compression, what is active, buffered and reflected). With it: that discussion's log as rendered
(`Date:` headings, bullet notes with nested details), or with `--notes` its notes one per row.
"""

from __future__ import annotations

from engram.cli.common import config_from, print_rows
from engram.cli.traces import run_sql
from engram.home import Home, ProjectionPaths
from engram.ids import validate_agent, validate_discussion

LOGS = (
    "SELECT scope, scope_id, messages, message_tokens, notes, note_tokens, round(observation_compression, 1) AS compression, "
    "active_notes AS active, buffered_notes AS buffered, reflected_notes AS reflected, activations, reflections, "
    "round(reflection_compression, 1) AS reflection_compression, unobserved_tokens AS unobserved, "
    "tokens_to_observer, tokens_to_reflector, file FROM observation_logs WHERE agent = ? "
    "ORDER BY scope, scope_id"
)
NOTES = (
    "SELECT strftime(observed_at, '%Y-%m-%d %H:%M') AS observed, status, type, round(importance, 2) AS importance, "
    "refers_to, text, source_message_ids AS messages FROM observation_notes WHERE agent = ? AND (scope_id = ? OR "
    "(scope = 'agent' AND stream = ?)) ORDER BY observed_at, recorded_seq, note_id"
)


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
    if args.discussion is None:
        names, rows = run_sql(args, LOGS, [agent])
        if not rows:
            print(f"no observation logs for agent {agent} yet (the Observer buffers every "
                  "memory.observer.bufferTokens and activates past memory.observer.activationTokens)")
            return 0
        print_rows(names, rows, args.fmt)
        return 0
    discussion = validate_discussion(args.discussion)
    if args.notes:
        names, rows = run_sql(args, NOTES, [agent, discussion, discussion])
        print_rows(names, rows, args.fmt) if rows else print(f"no observation notes for discussion {discussion}")
        return 0
    paths = ProjectionPaths(Home(config_from(args).home).projections_dir)
    for path in (paths.discussion_file(agent, discussion, "_observations.md"), paths.agent_dir(agent) / "observations.md"):
        if path.exists():
            print(f"{path}:\n")
            print(path.read_text(), end="")
            return 0
    print(f"no observation log for discussion {discussion} of agent {agent} yet")
    return 0

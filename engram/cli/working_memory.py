"""`engram working-memory --agent A`: the slots in focus and `working-memory.md`; `--write FILE` replaces the notes."""

from __future__ import annotations

import json
from pathlib import Path

from engram.cli.common import config_from, open_engram, print_rows
from engram.cli.main import UsageError
from engram.cli.traces import run_sql
from engram.home import Home, ProjectionPaths
from engram.ids import validate_agent
from engram.projections.working_memory import FILE_NAME


def register(sub) -> None:
    p = sub.add_parser("working-memory", help="show an agent's working memory (slots and working-memory.md)")
    p.add_argument("--agent", default="default")
    p.add_argument("--write", metavar="FILE", help="replace the persistent markdown notes with FILE (- for stdin)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    validate_agent(args.agent)
    config = config_from(args)
    if args.write:
        return write(args, config)
    names, rows = run_sql(
        args,
        "SELECT rank, tag, round(activation, 2) AS activation, content, entered_turn, rehearsals, turn, capacity, trace_id "
        "FROM working_memory WHERE agent = ? ORDER BY rank",
        [args.agent],
    )
    path = ProjectionPaths(Home(config.home, config.shards).projections_dir).agent_dir(args.agent) / FILE_NAME
    text = path.read_text() if path.exists() else ""
    if args.json:
        print(json.dumps({"slots": [dict(zip(names, r)) for r in rows], "file": str(path), "markdown": text}, indent=1, default=str))
        return 0
    if not names and not text:
        print(f"no working memory for agent {args.agent} yet")
        return 0
    if names:
        print(f"slots of agent {args.agent}:")
        print_rows(names, rows)
    print(f"\n{path}:\n")
    print(text.rstrip("\n") if text else "(not written yet)")
    return 0


def write(args, config) -> int:
    import sys

    from engram.cognition import CognitiveMemory

    try:
        text = sys.stdin.read() if args.write == "-" else Path(args.write).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{args.write}: cannot read: {exc.strerror}") from None
    with open_engram(args, config) as mem:
        CognitiveMemory(mem).write_working_memory(args.agent, text)
        mem.wait_projections()
    print(f"working memory notes of agent {args.agent} replaced ({len(text)} characters)")
    return 0

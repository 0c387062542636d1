"""`engram working-memory --agent A`: the slots in focus and `working-memory.md`; `--write FILE` replaces the notes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engram.cli.common import client, print_rows
from engram.cli.errors import UsageError
from engram.kernel.ids import validate_agent

SHOWN = ("rank", "tag", "activation", "content", "entered_turn", "rehearsals", "turn", "capacity", "trace_id")


def register(sub) -> None:
    p = sub.add_parser("working-memory", help="show an agent's working memory (slots and working-memory.md)")
    p.add_argument("--agent", default="default")
    p.add_argument("--write", metavar="FILE", help="replace the persistent markdown notes with FILE (- for stdin)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    validate_agent(args.agent)
    if args.write:
        return write(args)
    with client(args) as mem:
        wm = mem.working_memory(args.agent)
    if args.json:
        print(json.dumps({"slots": wm.slots, "file": wm.path, "markdown": wm.markdown}, indent=1, default=str))
        return 0
    if not wm.slots and not wm.markdown:
        print(f"no working memory for agent {args.agent} yet")
        return 0
    if wm.slots:
        print(f"slots of agent {args.agent}:")
        print_rows(list(SHOWN), [[s.get(k) for k in SHOWN] for s in wm.slots])
    print(f"\n{wm.path}:\n")
    print(wm.markdown.rstrip("\n") if wm.markdown else "(not written yet)")
    return 0


def write(args) -> int:
    try:
        text = sys.stdin.read() if args.write == "-" else Path(args.write).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{args.write}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    with client(args) as mem:
        mem.write_working_memory(args.agent, text)
    print(f"working memory notes of agent {args.agent} replaced ({len(text)} characters)")
    return 0

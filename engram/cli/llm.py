"""`engram llm check`: call each configured LLM endpoint once; per endpoint, what answered or what to fix."""

from __future__ import annotations

from engram.cli.common import client, to_json


def register(sub) -> None:
    p = sub.add_parser("llm", help="the LLM endpoints of engram.json")
    verbs = p.add_subparsers(dest="llm_command", metavar="VERB", required=True)
    check = verbs.add_parser("check", help="call each endpoint once: model, latency, JSON way, context window")
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(func=run_check)


def run_check(args) -> int:
    with client(args) as mem:
        result = mem.llm_check()
    if args.json:
        print(to_json(result))
    else:
        print(result.provider)
        for c in result.endpoints:
            print(c.line)
    return 0 if all(c.ok for c in result.endpoints) else 1

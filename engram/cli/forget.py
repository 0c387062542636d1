"""`engram forget`: erase a discussion or an agent — from the projections and from the log file."""

from __future__ import annotations

import json

from engram.cli.common import client, wait_job
from engram.kernel.ids import validate_agent, validate_discussion


def register(sub) -> None:
    p = sub.add_parser(
        "forget",
        help="erase a discussion or an agent (log payloads purged, projections rebuilt)",
        description="Appends DiscussionForgotten/AgentForgotten, replaces the payloads of every event of the "
        "discussion (and of every event caused by them) with tombstones, rewrites the log file so the old bytes "
        "are gone, and rebuilds the projections. Positions stay gap-free. This cannot be undone.",
    )
    p.add_argument("--agent", required=True)
    p.add_argument("--discussion", help="forget only this discussion (default: the whole agent)")
    p.add_argument("--reason", default="")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=run)


def run(args) -> int:
    agent = validate_agent(args.agent)
    discussion = validate_discussion(args.discussion) if args.discussion else None
    what = f"discussion {discussion!r} of agent {agent!r}" if discussion else f"everything of agent {agent!r}"
    if not args.yes:
        answer = input(f"erase {what} from the log and projections? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing erased")
            return 1
    with client(args) as mem:
        report = wait_job(mem, mem.forget(agent, discussion, reason=args.reason), "forget")
    print(json.dumps(report))
    return 0

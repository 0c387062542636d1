"""`engram memory get|edit|delete`: one memory at a time (a trace or fact id from `engram recall` / `engram traces`)."""

from __future__ import annotations

import json

from engram.cli.common import client, wait_job
from engram.cli.errors import UsageError
from engram.kernel.ids import validate_agent

KINDS = ("trace", "fact", "chunk", "vector")


def register(sub) -> None:
    p = sub.add_parser("memory", help="get, edit or delete one memory (a trace or fact)",
                       description="An edit is recorded as an event that supersedes the memory's text (recall finds "
                       "the new form; replay is identical). A delete erases the memory's text from the log file and "
                       "every projection, as `engram forget` does for a discussion; the messages it came from stay.")
    p.add_argument("action", choices=("get", "edit", "delete"))
    p.add_argument("memory_id")
    p.add_argument("--agent", default="default")
    p.add_argument("--kind", choices=KINDS, default="trace")
    p.add_argument("--content", help="edit: the memory's new text")
    p.add_argument("--title", help="edit: a vector memory's new title")
    p.add_argument("--metadata", action="append", default=None, metavar="KEY=VALUE",
                   help="edit: the memory's metadata (repeat for several keys; replaces the old metadata)")
    p.add_argument("--reason", default="", help="delete: why (recorded)")
    p.add_argument("--yes", action="store_true", help="delete: do not ask for confirmation")
    p.set_defaults(func=run)


def _metadata(pairs: list[str] | None) -> dict[str, str] | None:
    if pairs is None:
        return None
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--metadata {pair!r}: write KEY=VALUE")
        out[key] = value
    return out


def run(args) -> int:
    agent = validate_agent(args.agent)
    if args.action == "edit" and args.content is None and args.metadata is None and args.title is None:
        raise UsageError("memory edit needs --content, --title (a vector memory's), --metadata or more")
    if args.action == "delete" and not args.yes:
        answer = input(f"erase {args.kind} memory {args.memory_id!r} of agent {agent!r} for good? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing erased")
            return 1
    import msgspec

    with client(args) as mem:
        if args.action == "get":
            out = mem.memory(agent, args.kind, args.memory_id)
        elif args.action == "edit":
            out = mem.edit_memory(agent, args.kind, args.memory_id, content=args.content,
                                  metadata=_metadata(args.metadata), title=args.title)
        else:
            out = wait_job(mem, mem.delete_memory(agent, args.kind, args.memory_id, reason=args.reason), "delete")
    print(json.dumps(msgspec.to_builtins(out)))
    return 0

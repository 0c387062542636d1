"""`engram workflow run WORKFLOW --discussion ID [--messages FILE]`: run a WilmerAI-style workflow.

WORKFLOW is a JSON file (a list of nodes), or the name of one in `<home>/workflows/<name>.json`.
`--messages` appends a chat file (OpenAI JSON or JSONL) to the discussion first, the way every
message enters engram: `[DiscussionId]` tags are found (the first wins) and stripped, messages
left empty are dropped, and messages already recorded are recognised by id. The server runs the
workflow; what follows a WorkflowLock runs after the response, and the command returns when it is
done too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from engram.cli.common import client
from engram.cli.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("workflow", help="run a workflow of memory nodes (WilmerAI JSON)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    r = verbs.add_parser("run", help="run WORKFLOW (a JSON file, or a name in <home>/workflows/)")
    r.add_argument("workflow", metavar="WORKFLOW")
    r.add_argument("--discussion", metavar="ID", help="discussion id (default: the [DiscussionId] tag of --messages)")
    r.add_argument("--messages", metavar="FILE", help="chat messages to append first (OpenAI JSON or JSONL)")
    r.add_argument("--agent", default=None, help="the agent (default: default)")
    r.add_argument("--json", action="store_true", help="print one JSON object at the end")
    r.set_defaults(func=run)


def parse_messages(args):
    """(agent, discussion, [Message]) from --messages / --discussion, validated before anything runs."""
    from engram.api.types import Message
    from engram.events.envelope import from_us
    from engram.kernel.ids import DEFAULT_AGENT, validate_agent, validate_discussion
    from engram.memory.ingest.formats import IngestError, parse_file

    agent = validate_agent(args.agent or DEFAULT_AGENT)
    if not args.messages:
        return agent, (validate_discussion(args.discussion) if args.discussion else None), []
    try:
        conversations = parse_file(args.messages, discussion=args.discussion, now_us=int(time.time() * 1_000_000))
    except IngestError as exc:
        if "no discussion id" in str(exc):
            raise UsageError(f"{exc} (a workflow can also run without one: memory nodes then work statelessly)") from None
        raise UsageError(str(exc)) from None
    if len(conversations) != 1:
        raise UsageError(f"{args.messages}: holds {len(conversations)} discussions; a workflow runs on one")
    conv = conversations[0]
    return agent, conv.discussion, [Message(role=m.role, content=m.content, ts=from_us(m.ts_us), name=m.name,
                                            message_id=m.message_id, metadata=m.metadata) for m in conv.messages]


def workflow_source(name: str) -> dict:
    """The workflow to send: a file's text, or a name the server finds in <home>/workflows/."""
    path = Path(name)
    if path.exists():
        try:
            return {"text": path.read_text(encoding="utf-8"), "source": str(path)}
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: cannot read: {exc}") from None
    from engram.kernel.ids import InvalidIdError, validate_id

    try:
        validate_id(name, "workflow name")
    except InvalidIdError:
        raise UsageError(f"workflow {name!r}: no such file") from None
    return {"name": name}


def run(args) -> int:
    workflow = workflow_source(args.workflow)
    agent, discussion, messages = parse_messages(args)
    with client(args) as mem:
        started = time.perf_counter()
        out = mem.run_workflow(agent, discussion=discussion, messages=messages, **workflow)
        total = time.perf_counter() - started
    if args.json:
        from engram.cli.common import to_json

        doc = json.loads(to_json(out))
        doc["total_ms"] = round(total * 1000, 1)
        print(json.dumps(doc, ensure_ascii=False, indent=1))
        return 0
    if messages:
        print(f"{args.messages}: {out.appended} new message(s) appended to discussion {discussion!r}")
    print(f"response ({out.response_ms:.0f} ms, from {out.response_node or 'no node'}):")
    print(out.response or "(empty)")
    print("\nnodes:")
    for r in out.nodes:
        where = " (background, after the lock)" if r.background else ""
        text = r.output.replace("\n", " ")
        print(f"  {r.index}. {r.type} {r.id!r}{where}: {r.ms:.0f} ms"
              + (f"; {r.info}" if r.info else "")
              + (f"\n     -> {text[:160]}{'…' if len(text) > 160 else ''}" if text else ""))
    print(f"done in {total:.1f}s")
    return 0

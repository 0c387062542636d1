"""`engram workflow run WORKFLOW --discussion ID [--messages FILE]`: run a WilmerAI-style workflow.

WORKFLOW is a JSON file (a list of nodes), or the name of one in `<home>/workflows/<name>.json`.
`--messages` appends a chat file (OpenAI JSON or JSONL) to the discussion first, the way every
message enters engram: `[DiscussionId]` tags are found (the first wins) and stripped, messages
left empty are dropped, and messages already recorded are recognised by id. The response is
printed as soon as it exists; what follows a WorkflowLock runs after it, in the background,
and the command waits for it before it exits (the embedded runtime ends with the command).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from engram.cli.common import config_from, open_engram
from engram.cli.main import UsageError


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


def resolve_workflow(config, name: str):
    from engram.discussion.workflow import WorkflowError, load, workflow_path

    path = Path(name)
    if not path.exists():
        try:
            path = workflow_path(config.home, name)
        except ValueError:
            raise UsageError(f"workflow {name!r}: no such file") from None
        if not path.exists():
            raise UsageError(f"workflow {name!r}: no such file, and no {path}")
    try:
        return load(path)
    except WorkflowError as exc:
        raise UsageError(str(exc)) from None


def parse_messages(args, config):
    """(discussion, Write or None) from --messages / --discussion, validated before anything runs."""
    from engram.client import now_us
    from engram.ids import DEFAULT_AGENT, validate_agent, validate_discussion
    from engram.ingest.formats import IngestError, parse_file
    from engram.ingest.messages import MessageRejected, discussion_write

    agent = validate_agent(args.agent or DEFAULT_AGENT)
    if not args.messages:
        return agent, (validate_discussion(args.discussion) if args.discussion else None), None
    try:
        conversations = parse_file(args.messages, discussion=args.discussion, now_us=now_us())
    except IngestError as exc:
        if "no discussion id" in str(exc):
            raise UsageError(f"{exc} (a workflow can also run without one: memory nodes then work statelessly)") from None
        raise UsageError(str(exc)) from None
    if len(conversations) != 1:
        raise UsageError(f"{args.messages}: holds {len(conversations)} discussions; a workflow runs on one")
    conv = conversations[0]
    try:
        write = discussion_write(agent, conv.discussion, conv.messages, max_message_chars=config.limits.max_message_chars,
                                 where=args.messages)
    except MessageRejected as exc:
        raise UsageError(str(exc)) from None
    return agent, conv.discussion, write


def conversation(mem, agent: str, discussion: str | None, limit: int = 200):
    """The discussion's latest messages from the log, for chat variables and Standard nodes."""
    from engram.discussion.workflow import ChatMessage

    if discussion is None:
        return []
    records = mem.read(agent, stream=discussion, types=["MessageAppended"], limit=None)[-limit:]
    return [ChatMessage(r.event.role, r.event.content, r.event.name, r.event.message_id, r.seq, r.ts_us) for r in records]


def run(args) -> int:
    from engram.discussion.runtime import EngramMemory
    from engram.discussion.workflow import Responder, RunContext
    from engram.discussion.workflow import run as run_workflow
    from engram.discussion.workflow.engine import NodeFailed
    from engram.llm.factory import make_tasks

    from engram.llm.routing import check_routes

    config = config_from(args)
    workflow = resolve_workflow(config, args.workflow)
    check_routes(config.llm, workflow.routes(), workflow.source)  # a typo fails here, before anything runs
    agent, discussion, write = parse_messages(args, config)
    with open_engram(args, config) as mem:
        appended = 0
        if write is not None:
            mem.sync_settings(agent, ts_us=write.events[0].ts_us)
            result = mem.append([write])[0]
            appended = len(result.seqs) - result.duplicates
        else:
            mem.sync_settings(agent)
        memory = EngramMemory(mem, agent)
        ctx = RunContext(discussion=discussion, messages=conversation(mem, agent, discussion), memory=memory,
                         responder=Responder(make_tasks(config.llm)))
        started = time.perf_counter()
        try:
            outcome = run_workflow(workflow, ctx)
        except NodeFailed as exc:
            raise UsageError(str(exc)) from None
        if not args.json:
            if write is not None:
                print(f"{args.messages}: {appended} new message(s) appended to discussion {discussion!r}")
            print(f"response ({outcome.response_seconds * 1000:.0f} ms, from {outcome.response_node or 'no node'}):")
            print(outcome.response or "(empty)")
            sys.stdout.flush()
        outcome.wait()
        total = time.perf_counter() - started
    if args.json:
        print(json.dumps({
            "discussion": discussion, "agent": agent, "appended": appended, "response": outcome.response,
            "response_node": outcome.response_node, "response_ms": round(outcome.response_seconds * 1000, 1),
            "total_ms": round(total * 1000, 1),
            "nodes": [{"index": r.index + 1, "id": r.id, "type": r.kind, "output": r.output, "info": r.info,
                       "ms": round(r.seconds * 1000, 1), "background": r.background} for r in outcome.results],
        }, ensure_ascii=False, indent=1))
        return 0
    print("\nnodes:")
    for r in outcome.results:
        where = " (background, after the lock)" if r.background else ""
        text = r.output.replace("\n", " ")
        print(f"  {r.index + 1}. {r.kind} {r.id!r}{where}: {r.seconds * 1000:.0f} ms"
              + (f"; {r.info}" if r.info else "")
              + (f"\n     -> {text[:160]}{'…' if len(text) > 160 else ''}" if text else ""))
    print(f"done in {total:.1f}s")
    return 0

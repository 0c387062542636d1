"""`engram regenerate --discussion ID [--settings FILE]`: WilmerAI's consolidation workflow.

`engram regenerate --all|--agent A|--discussion ID --batch` does it through the Message Batches API (one job,
half the price, resumable: `engram regenerate --resume`; see `engram.api.batch_regen`).

A new generation of the discussion's memories is derived from its full history, in consolidation
mode (the new generation has no store yet, so only the token threshold cuts chunks), under the
settings of FILE if given (recorded in the discussion's stream; they stay in force for it). The
new generation supersedes the old one in the files; the old events stay in the log. If the
discussion had a rolling summary, it is rebuilt from the new memories.
"""

from __future__ import annotations

import sys
from pathlib import Path

from engram.cli.common import client, discussion_agent, wait_job
from engram.cli.errors import UsageError
from engram.kernel.ids import validate_discussion


def register(sub) -> None:
    p = sub.add_parser("regenerate", help="re-derive discussion memories as a new generation (consolidation); "
                                          "--batch: through Claude's Message Batches API, a whole home in one job")
    p.add_argument("--discussion", metavar="ID")
    p.add_argument("--settings", metavar="FILE", help="a _DiscussionId-MemoryFile-Workflow-Settings.json for this discussion")
    p.add_argument("--agent", help="the agent the discussion belongs to (default: found from the log); with --batch "
                                   "and no --discussion: every discussion of this agent")
    p.add_argument("--all", action="store_true", help="every discussion of the home (with --batch)")
    p.add_argument("--batch", action="store_true",
                   help="send the LLM calls as Message Batches (half the price; results within hours), resumable")
    p.add_argument("--resume", action="store_true", help="continue the batch regeneration a restart interrupted")
    p.set_defaults(func=run)


def read_settings(path: str) -> dict:
    """The settings file's content (JSON with comments); the server validates it before anything runs."""
    from engram.config import jsonc

    data = jsonc.load(Path(path), UsageError)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the top level must be a JSON object, got {type(data).__name__}")
    return data


def run(args) -> int:
    if args.resume or args.batch or args.all:
        return run_batch(args)
    if not args.discussion:
        raise UsageError("give --discussion ID (or --all --batch for every discussion of the home)")
    discussion = validate_discussion(args.discussion)
    settings = read_settings(args.settings) if args.settings else None
    with client(args) as mem:
        agent = discussion_agent(mem, discussion, args.agent)
        job = mem.regenerate(agent, discussion, settings=settings,
                             settings_name=Path(args.settings).name if args.settings else "settings.json")
        r = wait_job(mem, job, "regenerate")
    print(f"discussion {discussion!r} (agent {agent!r}): generation {r['generation']} supersedes generation "
          f"{r['superseded']}" + (f", with the settings of {args.settings}" if args.settings else ""))
    print(f"  {r['memories']} chunk memories and {r['vector_memories']} vector memories from the full history "
          f"(consolidation mode: only the token threshold)"
          + (f"; rolling summary rebuilt over {r['absorbed']} of them" if r["had_summary"] else ""))
    print(f"  the old generation's events stay in the log; done in {r['seconds']:.1f}s")
    if r.get("warning"):
        print(f"warning: {r['warning']}", file=sys.stderr)
        return 1
    return 0


def run_batch(args) -> int:
    """`--all --batch`, `--agent A --batch`, `--discussion D --batch`, `--resume`."""
    from engram.kernel.ids import validate_agent

    if args.settings:
        raise UsageError("--settings applies to one live regeneration: it cannot be combined with --batch or --resume")
    if args.resume:
        if args.all or args.discussion or args.agent:
            raise UsageError("--resume continues the interrupted job as it was planned: give no --all, --agent or "
                             "--discussion")
    elif not args.batch:
        raise UsageError("--all regenerates every discussion through the Message Batches API: add --batch")
    elif args.all and (args.discussion or args.agent):
        raise UsageError("--all means every discussion of the home: give no --agent or --discussion with it")
    elif not (args.all or args.discussion or args.agent):
        raise UsageError("--batch needs what to regenerate: --all, --agent A or --discussion ID")
    agent = validate_agent(args.agent) if args.agent else None
    discussion = validate_discussion(args.discussion) if args.discussion else None
    with client(args) as mem:
        job = mem.regenerate_batch(agent=agent, discussion=discussion, resume=args.resume)
        r = wait_job(mem, job, "regenerate --batch")
    print(f"batch regeneration {r['job']}: {r['applied']} of {r['discussions']} discussions regenerated "
          f"({r['events']} events), {r['requests']} requests in {r['batches']} Message Batches"
          + (f", {r['retried']} retried" if r["retried"] else "")
          + (f"; {r['resumed_batches']} accepted batch(es) collected after the restart" if r["resumed_batches"] else "")
          + f"; ${r['cost_usd']:.4f} at the batch price; done in {r['seconds']:.1f}s")
    print(f"  journal: {r['journal']}")
    for d, why in sorted(r["failed"].items()):
        print(f"error: discussion {d!r} not regenerated (it keeps its generation): {why}", file=sys.stderr)
    return 1 if r["failed"] else 0

"""`engram regenerate --discussion ID [--settings FILE]`: WilmerAI's consolidation workflow.

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
from engram.ids import validate_discussion


def register(sub) -> None:
    p = sub.add_parser("regenerate", help="re-derive a discussion's memories as a new generation (consolidation)")
    p.add_argument("--discussion", required=True, metavar="ID")
    p.add_argument("--settings", metavar="FILE", help="a _DiscussionId-MemoryFile-Workflow-Settings.json for this discussion")
    p.add_argument("--agent", help="the agent the discussion belongs to (default: found from the log)")
    p.set_defaults(func=run)


def read_settings(path: str) -> dict:
    """The settings file's content (JSON with comments); the server validates it before anything runs."""
    from engram.config import jsonc

    try:
        data = jsonc.loads(Path(path).read_text(encoding="utf-8"), path)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None
    except jsonc.JsoncError as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the top level must be a JSON object, got {type(data).__name__}")
    return data


def run(args) -> int:
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

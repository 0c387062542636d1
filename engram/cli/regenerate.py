"""`engram regenerate --discussion ID [--settings FILE]`: WilmerAI's consolidation workflow.

A new generation of the discussion's memories is derived from its full history, in consolidation
mode (the new generation has no store yet, so only the token threshold cuts chunks), under the
settings of FILE if given (recorded in the discussion's stream; they stay in force for it). The
new generation supersedes the old one in the files; the old events stay in the log. If the
discussion had a rolling summary, it is rebuilt from the new memories.
"""

from __future__ import annotations

import sys
import time

from engram.cli.common import config_from, open_engram
from engram.cli.discussion_support import log_agent
from engram.cli.main import UsageError


def register(sub) -> None:
    p = sub.add_parser("regenerate", help="re-derive a discussion's memories as a new generation (consolidation)")
    p.add_argument("--discussion", required=True, metavar="ID")
    p.add_argument("--settings", metavar="FILE", help="a _DiscussionId-MemoryFile-Workflow-Settings.json for this discussion")
    p.add_argument("--agent", help="the agent the discussion belongs to (default: found from the log)")
    p.set_defaults(func=run)


def run(args) -> int:
    from engram.discussion.regenerate import HISTORY_TYPES, Generation, NothingToRegenerate
    from engram.discussion.runtime import EngramMemory, now_us
    from engram.ids import validate_discussion
    from engram.settings import discussion_settings_event

    config = config_from(args)
    discussion = validate_discussion(args.discussion)
    settings = discussion_settings_event(args.settings, config.llm) if args.settings else None  # validated before anything runs
    with open_engram(args, config) as mem:
        agent = log_agent(mem, discussion, args.agent)
        mem.sync_settings(agent)
        history = mem.read(agent, stream=discussion, limit=None, types=list(HISTORY_TYPES))
        try:
            generation = Generation(agent, discussion, history, reason="engram regenerate", ts_us=now_us(), settings=settings)
        except NothingToRegenerate as exc:
            raise UsageError(str(exc)) from None
        new, had_summary = generation.number, generation.had_summary
        started = time.perf_counter()
        mem.append([generation.write])
        memory = EngramMemory(mem, agent)
        failed = memory.drain(discussion)
        counts = memory.counts(discussion)
        seconds = time.perf_counter() - started
    print(f"discussion {discussion!r} (agent {agent!r}): generation {new} supersedes generation {generation.previous}"
          + (f", with the settings of {args.settings}" if args.settings else ""))
    print(f"  {counts['memories']} chunk memories and {counts['vector_memories']} vector memories from the full history "
          f"(consolidation mode: only the token threshold)"
          + (f"; rolling summary rebuilt over {counts['absorbed']} of them" if had_summary else ""))
    print(f"  the old generation's events stay in the log; done in {seconds:.1f}s")
    if failed:
        print(f"warning: {failed.rstrip('; ')}", file=sys.stderr)
        return 1
    return 0

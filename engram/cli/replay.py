"""`engram replay`: rebuild projections from the log, in place or into a fresh directory (a job of the server)."""

from __future__ import annotations

import json
from pathlib import Path

from engram.cli.common import client, wait_job
from engram.cli.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("replay", help="rebuild projections from the log (no LLM calls)")
    p.add_argument("--out", help="a fresh directory to replay into, under <home>/exports/ or server.exportRoot "
                   "(default: rebuild the home's projections in place)")
    p.add_argument("--as-of", help="replay up to a position (SEQ) or an event time (ISO-8601)")
    p.add_argument("--all", action="store_true", help="every shard at once, each on its node (the default without "
                   "--agent), with a report: events/s per shard and in total")
    p.add_argument("--agent", help="with --as-of SEQ on several shards: the agent whose shard SEQ refers to")
    p.add_argument("--verify", action="store_true", help="replay into scratch space and compare with the live projections")
    p.add_argument("--discussion", metavar="ID", help="rebuild only this discussion's three memory files (with --verify: compare them)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from engram.kernel.ids import validate_agent, validate_discussion

    if args.agent:
        validate_agent(args.agent)
    if args.discussion:
        validate_discussion(args.discussion)
        if args.out or args.as_of:
            raise UsageError("--discussion rebuilds the discussion's live files; it takes no --out or --as-of")
    if args.all and (args.agent or args.discussion):
        raise UsageError("--all replays every shard; it takes no --agent or --discussion")
    if args.as_of and not args.out:
        raise UsageError("--as-of needs --out: the live projections always reflect the whole log")
    out = str(Path(args.out).expanduser().resolve()) if args.out else None
    with client(args) as mem:
        if args.discussion:
            return replay_discussion(mem, args)
        job = mem.replay(out=out, as_of=args.as_of, agent=args.agent, verify=args.verify)
        result = wait_job(mem, job, "replay (shards)")
    if args.verify:
        print("replay reproduces the live projections exactly" if result["identical"] else "\n".join(result["differences"]))
        return 0 if result["identical"] else 1
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for r in result["shards"]:
        rate = f"{r['events_per_s']:,}/s" if r.get("events_per_s") else "-"
        where = f" on {r['node']}" if r.get("node") else ""
        print(f"shard {r['shard']}{where}: replayed {r['events']} events in {r['seconds']}s ({rate}) into {r['out']}")
    total = f"{result['events_per_s']:,}/s" if result.get("events_per_s") else "-"
    print(f"total: {result['events']} events from {len(result['shards'])} shard(s) in {result['seconds']}s ({total}), "
          "no LLM call")
    return 0


WORDS = {
    "replaced": ("differs from the log", "rebuilt (it differed)"),
    "restored": ("was missing", "restored (it was missing)"),
    "removed": ("should not exist", "removed (the log has no such file)"),
    "identical": ("identical to the log's",) * 2, "absent": ("absent (nothing in the log for it)",) * 2,
    "untouched": ("left as it is",) * 2, "differs": ("differs",) * 2,
}


def replay_discussion(mem, args) -> int:
    """The discussion's three files rebuilt from the log (or compared with it: --verify), no LLM call."""
    from engram.cli.common import discussion_agent

    agent = discussion_agent(mem, args.discussion, args.agent)
    result = wait_job(mem, mem.replay_discussion(agent, args.discussion, verify=args.verify), "replay (discussion)")
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for f in result["files"]:
            word = WORDS[f["status"]][0 if args.verify else 1]
            print(f"{f['path']}: {word}" + (f" ({f['size']} bytes)" if f["size"] else ""))
        print(f"{result['events']} events of discussion {args.discussion!r} replayed in {result['seconds']:.2f}s, no LLM call")
    differs = [f for f in result["files"] if f["status"] in ("replaced", "restored", "removed")]
    return 1 if args.verify and differs else 0

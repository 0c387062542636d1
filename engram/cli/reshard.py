"""`engram reshard --shards N`: grow the home to N shards, moving only the agents that must move (a server job)."""

from __future__ import annotations

import json

from engram.cli.common import client, wait_job
from engram.cli.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("reshard", help="add shards: move the agents the new layout places on them (no event lost)",
                       description="Grows the home to N shards. Each new shard is split off an existing one; only the "
                       "agents it wins move, with their whole streams, at their own positions. Appends wait while "
                       "the layout switches. On a cluster, place the new shards in engram.json's cluster.nodes first.")
    p.add_argument("--shards", type=int, required=True, metavar="N", help="the new shard count (more than now)")
    p.add_argument("--json", action="store_true", help="print the job's report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.shards < 2:
        raise UsageError(f"--shards must be at least 2 (got {args.shards}); re-sharding only adds shards")
    with client(args) as mem:
        result = wait_job(mem, mem.reshard(args.shards), "reshard (events)")
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    before, after = result["shards"]["before"], result["shards"]["after"]
    print(f"{before} -> {after} shards: {result['agents_moved']} of {result['agents']} agent(s) moved, "
          f"{result['events_moved']} event(s) copied in {result['seconds']}s")
    for agent, (src, dst) in result["moves"].items():
        print(f"  {agent}: shard {src} -> {dst}")
    return 0

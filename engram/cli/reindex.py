"""`engram reindex`: re-embed the home with the embedder engram.json names, then switch to it (a server job)."""

from __future__ import annotations

import json

from engram.cli.common import client, wait_job


def register(sub) -> None:
    p = sub.add_parser("reindex", help="re-embed everything with the configured embedder, then switch to it",
                       description="After a change of `embedder` in engram.json the home keeps serving with the "
                       "embedder its vectors were made by (`engram status` lists what must be re-embedded). This "
                       "records the discussion memories' new vectors in the log and builds a new generation of the "
                       "projections from the log with the configured embedder, while the home keeps serving from the "
                       "old one (reads and appends); then switches. Appends wait only for the last short catch-up and "
                       "the switch. Stopped or failed before the switch, the old generation goes on serving.")
    p.add_argument("--json", action="store_true", help="print the job's report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    with client(args) as mem:
        result = wait_job(mem, mem.reindex(), "reindex", stages=True)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    if not result["reindexed"]:
        print(f"nothing to re-embed: the home already serves with the configured embedder ({result['embedder']})")
        return 0
    print(f"rebuilt the projections from {result['events']} event(s) and re-embedded {result['discussion_memories']} "
          f"discussion memory(ies) with {result['name']} in {result['seconds']}s, appends held "
          f"{result['held_seconds']}s for the switch; the home now serves with it (was: {result['before']})")
    return 0

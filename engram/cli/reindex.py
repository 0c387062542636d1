"""`engram reindex`: re-embed the home with the embedder engram.json names, then switch to it (a server job)."""

from __future__ import annotations

import json

from engram.cli.common import client, wait_job


def register(sub) -> None:
    p = sub.add_parser("reindex", help="re-embed everything with the configured embedder, then switch to it",
                       description="After a change of `embedder` in engram.json the home keeps serving with the "
                       "embedder its vectors were made by (`engram status` lists what must be re-embedded). This "
                       "embeds every trace and discussion memory with the configured embedder while the home keeps "
                       "serving, then switches: trace indexes rebuilt from the log, discussion memories' new vectors "
                       "recorded in the log. Appends wait only during the switch.")
    p.add_argument("--json", action="store_true", help="print the job's report as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    with client(args) as mem:
        result = wait_job(mem, mem.reindex(), "reindex (texts)")
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    if not result["reindexed"]:
        print(f"nothing to re-embed: the home already serves with the configured embedder ({result['embedder']})")
        return 0
    print(f"re-embedded {result['texts']} text(s) and {result['discussion_memories']} discussion memory(ies) with "
          f"{result['name']} in {result['seconds']}s; the home now serves with it (was: {result['before']})")
    return 0

"""`engram replay`: rebuild projections from the log, in place or into a fresh directory."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import ray

from engram.cli.common import config_from, open_engram
from engram.cli.errors import UsageError
from engram.events.envelope import to_us


def register(sub) -> None:
    p = sub.add_parser("replay", help="rebuild projections from the log (no LLM calls)")
    p.add_argument("--out", help="a fresh directory to replay into (default: rebuild the home's projections in place)")
    p.add_argument("--as-of", help="replay up to a position (SEQ) or an event time (ISO-8601)")
    p.add_argument("--agent", help="with --as-of SEQ on several shards: the agent whose shard SEQ refers to")
    p.add_argument("--verify", action="store_true", help="replay into scratch space and compare with the live projections")
    p.add_argument("--discussion", metavar="ID", help="rebuild only this discussion's three memory files (with --verify: compare them)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def parse_as_of(text: str | None) -> tuple[int | None, int | None]:
    """(to_seq, until_us) from `--as-of`."""
    if text is None:
        return None, None
    if text.isdigit():
        return int(text), None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--as-of {text!r} is neither a position (an integer) nor an ISO-8601 time") from None
    return None, to_us(ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc))


def run(args) -> int:
    config = config_from(args)
    if args.discussion:
        from engram.cli.discussion_support import replay_discussion

        return replay_discussion(args, config)
    to_seq, until_us = parse_as_of(args.as_of)
    if to_seq is not None and config.shards > 1 and not args.agent:
        raise UsageError("positions are per shard: with several shards, give --agent with --as-of SEQ, or use a time")
    if args.as_of and not args.out:
        raise UsageError("--as-of needs --out: the live projections always reflect the whole log")
    if args.out:
        out = Path(args.out).resolve()
        if out.exists() and any(out.iterdir()):
            raise UsageError(f"{out} is not empty; replay writes into a fresh directory")
    with open_engram(args, config) as mem:
        if args.agent:
            shards = [mem.runtime.shard(mem.shard_of(args.agent))]
        else:
            shards = mem.runtime.shards()
        if args.verify:
            diffs = [d for s in shards for d in ray.get(s.verify_replay.remote())]
            print("replay reproduces the live projections exactly" if not diffs else "\n".join(diffs))
            return 0 if not diffs else 1
        if args.out:
            reports = ray.get([s.replay_into.remote(str(out), to_seq, until_us) for s in shards])
        else:
            reports = ray.get([s.rebuild.remote() for s in shards])
    if args.json:
        print(json.dumps(reports, indent=1))
    else:
        for r in reports:
            rate = r["events"] / r["seconds"] if r["seconds"] else 0
            print(f"shard {r['shard']}: replayed {r['events']} events in {r['seconds']}s ({rate:,.0f}/s) into {r['out']}")
    return 0

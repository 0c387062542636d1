"""`engram ingest FILE`: conversations into the log, all or nothing per file."""

from __future__ import annotations

import sys
import time

from engram.cli.common import Progress, config_from, open_engram
from engram.cli.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("ingest", help="append the messages of a chat file to the log")
    p.add_argument("files", nargs="+", metavar="FILE", help="OpenAI chat JSON, JSONL of messages, or LoCoMo JSON")
    p.add_argument("--agent", default="default", help="the agent these conversations belong to (default: default)")
    p.add_argument("--discussion", help="discussion id, when the file has no [DiscussionId] tag")
    p.add_argument("--format", choices=["openai", "jsonl", "locomo"], help="input format (default: detected)")
    p.add_argument("--no-wait", action="store_true", help="return once appended, without waiting for memory to catch up")
    p.set_defaults(func=run)


def prepare(args, config) -> list:
    """Every file parsed and validated before anything is appended."""
    from engram.client import now_us
    from engram.ids import validate_agent
    from engram.ingest.formats import IngestError, parse_file
    from engram.ingest.messages import MessageRejected, discussion_write

    validate_agent(args.agent)
    writes = []
    for path in args.files:
        try:
            conversations = parse_file(path, discussion=args.discussion, fmt=args.format, now_us=now_us())
            for conv in conversations:
                write = discussion_write(
                    args.agent, conv.discussion, conv.messages,
                    max_message_chars=config.limits.max_message_chars, where=f"{path} [{conv.discussion}]",
                )
                if write:
                    writes.append((path, write))
        except (IngestError, MessageRejected) as exc:
            raise UsageError(f"{exc}\nnothing of {path} was appended") from None
    return writes


def run(args) -> int:
    config = config_from(args)
    writes = prepare(args, config)
    if not writes:
        print("nothing to append", file=sys.stderr)
        return 0
    with open_engram(args, config) as mem:
        started = time.perf_counter()
        first_ts = min(e.ts_us for _, w in writes for e in w.events)
        if mem.sync_settings(args.agent, ts_us=first_ts):
            print(f"settings recorded in the log for agent {args.agent} (files under {config.home})")
        for path in args.files:
            file_writes = [w for p, w in writes if p == path]
            results = mem.append(file_writes)
            new = sum(len(r.seqs) - r.duplicates for r in results)
            dups = sum(r.duplicates for r in results)
            discussions = ", ".join(sorted({w.stream for w in file_writes}))
            print(f"{path}: {new} new message(s), {dups} already recorded, discussion(s): {discussions}")
        if not args.no_wait:
            wait_for_memory(mem)
        print(f"done in {time.perf_counter() - started:.1f}s (agent {args.agent}, home {config.home})")
    return 0


def wait_for_memory(mem) -> None:
    """Show progress while projections and policies catch up with what was appended."""
    bar = None

    def show(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = Progress("memory (events every projection and policy has handled)", total)
        bar.total = max(total, 1)  # policies append as they work: the log grows while memory catches up
        bar.update(done)

    idle = mem.wait_idle(on_progress=show)
    if bar is not None:
        bar.finish()
    if not idle:
        print("memory is still catching up in the background (see `engram status`)", file=sys.stderr)

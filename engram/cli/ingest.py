"""`engram ingest FILE…`: append the messages of chat files to the log (through the home's server).

Every file is parsed and validated here, before anything is sent: a malformed file costs
milliseconds and appends nothing. The conversations of one file commit together, all or none.
"""

from __future__ import annotations

import sys
import time

from engram.cli.common import Progress, client
from engram.cli.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("ingest", help="append the messages of a chat file to the log")
    p.add_argument("files", nargs="+", metavar="FILE", help="OpenAI chat JSON, JSONL of messages, or LoCoMo JSON")
    p.add_argument("--agent", default="default", help="the agent these conversations belong to (default: default)")
    p.add_argument("--discussion", help="discussion id, when the file has no [DiscussionId] tag")
    p.add_argument("--format", choices=["openai", "jsonl", "locomo"], help="input format (default: detected)")
    p.add_argument("--no-wait", action="store_true", help="return once appended, without waiting for memory to catch up")
    p.set_defaults(func=run)


def prepare(args) -> list[tuple[str, list]]:
    """(file, [Conversation]) for every file, parsed and validated before anything is appended."""
    from engram.api.types import Conversation, Message, Role
    from engram.events.envelope import from_us
    from engram.kernel.ids import validate_agent
    from engram.memory.ingest.formats import IngestError, parse_file

    validate_agent(args.agent)
    roles: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}
    now = int(time.time() * 1_000_000)
    out = []
    for path in args.files:
        try:
            conversations = parse_file(path, discussion=args.discussion, fmt=args.format, now_us=now)
        except IngestError as exc:
            raise UsageError(f"{exc}\nnothing of {path} was appended") from None
        convs = []
        for conv in conversations:
            for i, m in enumerate(conv.messages):
                if m.role not in roles:
                    raise UsageError(f"{path} [{conv.discussion}]: message {i + 1}: role {m.role!r} is not one of "
                                     f"assistant, system, tool, user\nnothing of {path} was appended")
            messages = [Message(role=roles[m.role], content=m.content, ts=from_us(m.ts_us), name=m.name,
                                message_id=m.message_id, metadata=m.metadata) for m in conv.messages]
            if messages:
                convs.append(Conversation(discussion=conv.discussion, messages=messages))
        out.append((path, convs))
    return out


def run(args) -> int:
    from engram.api.errors import ApiError

    files = prepare(args)
    if not any(convs for _, convs in files):
        print("nothing to append", file=sys.stderr)
        return 0
    with client(args) as mem:
        started = time.perf_counter()
        for path, convs in files:
            if not convs:
                print(f"{path}: nothing to append")
                continue
            try:
                res = mem.append_conversations(args.agent, convs)
            except ApiError as exc:
                if exc.code in ("malformed_messages", "invalid_request", "invalid_id"):
                    raise UsageError(f"{path}: {exc.message}\nnothing of {path} was appended") from None
                raise
            if res.settings_recorded:
                print(f"settings recorded in the log for agent {args.agent} (files under {home(mem)})")
            new = sum(r.appended for r in res.results)
            dups = sum(r.duplicates for r in res.results)
            discussions = ", ".join(sorted({r.discussion for r in res.results}))
            print(f"{path}: {new} new message(s), {dups} already recorded, discussion(s): {discussions}")
        if not args.no_wait:
            wait_for_memory(mem)
        print(f"done in {time.perf_counter() - started:.1f}s (agent {args.agent}, home {home(mem)})")
    return 0


def home(mem) -> str:
    """The home the server serves (a key limited to agents may not ask: then the URL says where it went)."""
    from engram.api.errors import ApiError

    try:
        return mem.server_info().home
    except ApiError:
        return getattr(mem, "url", "the server's home")


def behind_note(behind: tuple[str, ...], most: int = 3) -> str:
    """What the progress line says holds it back: the projections or policies furthest behind."""
    if not behind:
        return ""
    names = ", ".join(behind[:most]) + (f" and {len(behind) - most} more" if len(behind) > most else "")
    return f"waiting for {names}"


def wait_for_memory(mem) -> None:
    """Show progress while projections and policies catch up with what was appended."""
    bar, last = None, 0

    def show(done: int, total: int, behind: tuple[str, ...] = ()) -> None:
        nonlocal bar, last
        if bar is None:
            bar = Progress("memory (events every projection and policy has handled)", total)
        bar.total = max(total, 1)  # policies append as they work: the log grows while memory catches up
        bar.note = behind_note(behind)
        bar.update(done)
        last = done

    idle = mem.wait_idle(on_progress=show)
    if bar is not None:
        bar.finish(None if idle else last)  # a wait that timed out ends on where memory got, and what it waits for
    if not idle:
        print("memory is still catching up in the background (see `engram status`)", file=sys.stderr)

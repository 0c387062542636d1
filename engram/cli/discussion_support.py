"""What the discussion-memory commands share: finding a discussion's agent and files."""

from __future__ import annotations

from engram.cli.main import UsageError
from engram.config.service import ServiceConfig
from engram.discussion.files import DiscussionNotFound, locate_agent
from engram.home import Home, ProjectionPaths
from engram.ids import validate_agent, validate_discussion


def projection_paths(config: ServiceConfig) -> ProjectionPaths:
    return ProjectionPaths(Home(config.home, config.shards).projections_dir)


def reader_agent(config: ServiceConfig, discussion: str, agent: str | None) -> str:
    """The agent owning `discussion`, found from its files (readers start nothing)."""
    try:
        return locate_agent(projection_paths(config), discussion, agent)
    except DiscussionNotFound as exc:
        raise UsageError(str(exc)) from None


def log_agent(mem, discussion: str, agent: str | None) -> str:
    """The agent owning `discussion`, from the log (the stream belongs to exactly one agent)."""
    validate_discussion(discussion)
    if agent is not None:
        return validate_agent(agent)
    _, rows = mem.sql("SELECT DISTINCT agent FROM events WHERE stream = ?", [discussion])
    agents = sorted({r[0] for r in rows})
    if not agents:
        raise UsageError(f"discussion {discussion!r} has no events in {mem.config.home}")
    return agents[0]


def replay_discussion(args, config) -> int:
    """`engram replay --discussion ID [--verify]`: the three files rebuilt from the log, no LLM call."""
    import time

    from engram.cli.common import open_engram
    from engram.discussion.rebuild import rebuild_discussion

    if args.out or args.as_of:
        raise UsageError("--discussion rebuilds the discussion's live files; it takes no --out or --as-of")
    validate_discussion(args.discussion)
    # What exists now: opening the shard may already render missing files from its tables.
    before = set((projection_paths(config).root / "agents").glob(f"*/Public/{args.discussion}_*"))
    with open_engram(args, config) as mem:
        agent = log_agent(mem, args.discussion, args.agent)
        mem.wait_projections()
        started = time.perf_counter()
        records = mem.read(agent, stream=args.discussion, limit=None)
        reports = rebuild_discussion(records, projection_paths(config), agent, args.discussion, dry_run=args.verify)
        seconds = time.perf_counter() - started
    for r in reports:
        if r.status == "identical" and r.path not in before:
            r.status = "restored"
    differs = [r for r in reports if r.status in ("replaced", "restored", "removed")]
    for r in reports:
        word = {"replaced": "differs from the log" if args.verify else "rebuilt (it differed)",
                "restored": "was missing (restored from the projection tables as the shard opened)" if args.verify
                else "restored (it was missing)",
                "removed": "should not exist" if args.verify else "removed (the log has no such file)",
                "identical": "identical to the log's", "absent": "absent (nothing in the log for it)",
                "untouched": "left as it is", "differs": "differs"}[r.status]
        print(f"{r.path}: {word}" + (f" ({r.size} bytes)" if r.size else ""))
    print(f"{len(records)} events of discussion {args.discussion!r} replayed in {seconds:.2f}s, no LLM call")
    return 1 if args.verify and differs else 0

"""`engram inspect --agent A [--discussion D] --out report.html`: the web inspector as one self-contained file."""

from __future__ import annotations

from pathlib import Path

from engram.cli.common import home_of, validate_settings
from engram.cli.errors import UsageError
from engram.ids import validate_agent, validate_discussion


def register(sub) -> None:
    p = sub.add_parser(
        "inspect",
        help="write the web inspector of an agent's memory as one HTML file (works offline)",
        description="Six views: timeline with lineage, forgetting curves, trace graph, a recall explained, working "
        "memory and the context window, discussion memory's three files. The file holds Plotly and the data; it opens "
        "from disk with no network.",
    )
    p.add_argument("--agent", default="default")
    p.add_argument("--discussion", help="the discussion to show (default: the agent's most recent one)")
    p.add_argument("--out", required=True, help="the HTML file to write")
    p.add_argument("--query", action="append", default=[], metavar="TEXT",
                   help="a recall to explain in the file (repeatable; default: the discussion's latest user message)")
    p.add_argument("--no-recall", dest="recall", action="store_false",
                   help="no recall in the file: reads the home's files and starts nothing")
    p.set_defaults(func=run)


def run(args) -> int:
    from engram.inspect.adapter import open_reader
    from engram.inspect.api import InspectError, Inspector, NotFound
    from engram.inspect.page import report_html
    from engram.inspect.recall import default_queries

    agent = validate_agent(args.agent)
    if args.discussion is not None:
        validate_discussion(args.discussion)
    queries = [q.strip() for q in args.query]
    if any(not q for q in queries):
        raise UsageError("--query is empty")
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory")
    if not out.parent.exists():
        raise UsageError(f"--out {out}: folder {out.parent} does not exist")
    from engram.home import Home

    config = validate_settings(home_of(args))
    if not Home(config.home, config.shards).existing_log_paths():
        raise UsageError(f"{config.home} has no event log (nothing was ever recorded there)")
    with open_reader(args, config, recall=args.recall) as reader:
        inspector = Inspector(reader)
        try:
            overview = inspector.get("overview", {"agent": agent, **({"discussion": args.discussion} if args.discussion else {})})
            if not overview["events"]:
                raise UsageError(f"agent {agent!r} has no events in {config.home}")
            if args.recall and not queries and overview["discussion"]:
                queries = default_queries(reader, agent, overview["discussion"])
            html = report_html(inspector, agent, overview["discussion"], queries if args.recall else [],
                               home=str(config.home))
        except (InspectError, NotFound) as exc:
            raise UsageError(str(exc)) from None
    out.write_text(html, encoding="utf-8")
    print(f"wrote {out} ({len(html.encode()) / 1e6:.1f} MB): agent {agent}, discussion {overview['discussion'] or '-'}, "
          f"{overview['active_traces']} active traces; open it in a browser (no network needed)")
    return 0


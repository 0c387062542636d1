"""`engram inspect --agent A [--discussion D] --out report.html`: the web inspector as one self-contained file;
without `--out`, the URL of the same page served by the home's server (`/inspect`)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from engram.cli.common import home_of, validate_settings
from engram.cli.errors import UsageError
from engram.kernel.ids import validate_agent, validate_discussion
from engram.kernel.private import write_private


@contextlib.contextmanager
def open_reader(args, config, *, recall: bool):
    """The reader a command uses: the home's server when one runs or recall is wanted (a command starts it, as
    every command does), else the home's files (nothing is started)."""
    from engram.cli.common import client
    from engram.config.home import Home
    from engram.inspect.adapter import EngramReader, HomeFilesReader
    from engram.server.instance import live_server

    if recall or live_server(Home(config.home, config.shards).root) is not None:
        with client(args) as mem:
            yield EngramReader(mem, config)
    else:
        reader = HomeFilesReader(config)
        try:
            yield reader
        finally:
            reader.close()


def register(sub) -> None:
    p = sub.add_parser(
        "inspect",
        help="the web inspector of an agent's memory: its URL on the home's server, or one HTML file (--out)",
        description="Six views: timeline with lineage, forgetting curves, trace graph, a recall explained, working "
        "memory and the context window, discussion memory's three files. Without --out: the URL of the page the "
        "home's server serves (started if none runs). With --out: one file holding Plotly and the data; it opens "
        "from disk with no network.",
    )
    p.add_argument("--agent", default="default")
    p.add_argument("--discussion", help="the discussion to show (default: the agent's most recent one)")
    p.add_argument("--out", help="the HTML file to write (without it: print the served page's URL)")
    p.add_argument("--query", action="append", default=[], metavar="TEXT",
                   help="a recall to explain in the file (repeatable; default: the discussion's latest user message)")
    p.add_argument("--no-recall", dest="recall", action="store_false",
                   help="no recall in the file: reads the home's files and starts nothing")
    p.set_defaults(func=run)


def run(args) -> int:
    from engram.inspect.api import InspectError, Inspector, NotFound
    from engram.inspect.page import report_html
    from engram.inspect.recall import default_queries

    agent = validate_agent(args.agent)
    if args.discussion is not None:
        validate_discussion(args.discussion)
    queries = [q.strip() for q in args.query]
    if any(not q for q in queries):
        raise UsageError("--query is empty")
    if args.out is None:
        return print_url(args, agent)
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory")
    if not out.parent.exists():
        raise UsageError(f"--out {out}: folder {out.parent} does not exist")
    from engram.config.home import Home

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
    write_private(out, html)  # the agent's conversations: readable by their owner alone, as in the home
    print(f"wrote {out} ({len(html.encode()) / 1e6:.1f} MB): agent {agent}, discussion {overview['discussion'] or '-'}, "
          f"{overview['active_traces']} active traces; open it in a browser (no network needed)")
    return 0



def print_url(args, agent: str) -> int:
    """The served inspector's URL for the agent (and discussion), checked against the home's server first."""
    from engram.cli.common import client
    from engram.inspect.web import page_url

    if args.query or not args.recall:
        raise UsageError("--query and --no-recall go with --out (the served page recalls whatever you type)")
    with client(args) as mem:
        mem.traces(agent, limit=1)  # an agent the home does not know is refused here (unknown_agent)
        if args.discussion is not None:
            mem.memories(agent, args.discussion, last=1)  # refused (unknown_discussion) unless it is the agent's
        url = page_url(mem.url, agent, args.discussion)
    print(f"{url}  (the inspector of agent {agent} on the home's server; open it in a browser)")
    return 0

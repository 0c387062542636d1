"""`engram demo`: the main job on the embedded default, on a conversation shipped with engram.

The demo is a client like every command: it starts the demo home's server (local Ray, DuckDB, the
offline LLM and embeddings), talks to it over HTTP, and stops it at the end. Each part of engram adds
a section (a function taking the `Demo`) to SECTIONS.
"""

from __future__ import annotations

import shutil
import sys
import time
from importlib import resources
from pathlib import Path

from engram.cli.common import client, print_rows
from engram.kernel.private import private_home

SAMPLE = "acme-dashboard.jsonl"
AGENT = "demo-agent"
DEMO_HOME = "~/.engram-demo"  # the demo's own home, next to the default ~/.engram (a fresh one each run)

SECTIONS = [
    "engram.cli.demo_sections:providers",
    "engram.cli.demo_background:configure",
    "engram.cli.demo_sections:ingest",
    "engram.cli.demo_sections:log_sql",
    "engram.cli.demo_cognitive:cognitive",
    "engram.cli.demo_background:background",
    "engram.cli.demo_sections:status",
    "engram.cli.demo_discussion:discussion_memory",
    "engram.cli.demo_context:infinite_context",
    "engram.cli.demo_sections:replay",
    "engram.cli.demo_inspect:inspector",
]


class Demo:
    def __init__(self, mem, home: Path, sample: Path):
        self.mem, self.home, self.sample = mem, home, sample
        self.agent = AGENT
        self.discussion = ""
        self.notes: list[str] = []

    def heading(self, text: str) -> None:
        print(f"\n== {text} " + "=" * max(0, 70 - len(text)))

    def query(self, query: str, params: list | None = None) -> tuple[list[str], list[list]]:
        res = self.mem.sql(query, params)
        return res.columns, res.rows

    def sql(self, query: str, fmt: str = "table") -> list:
        print(f"$ engram sql \"{query}\"")
        names, rows = self.query(query)
        print_rows(names, rows, fmt)
        return rows


def register(sub) -> None:
    p = sub.add_parser("demo", help="run engram end to end on a sample conversation (fresh demo home)")
    p.add_argument("--keep", action="store_true", help="keep the demo home's previous contents")
    p.add_argument("--stop-server", action="store_true",
                   help="stop the demo home's server at the end (by default it keeps running, serving the inspector, "
                        "until server.idleTimeoutSeconds without a request or `engram down`)")
    p.set_defaults(func=run)


def run(args) -> int:
    import importlib

    from engram.server.instance import live_server

    home = Path(args.home or DEMO_HOME).expanduser().resolve()
    if live_server(home) is not None and not args.keep:
        from engram.cli.down import run as down

        down(args.__class__(home=str(home)))
    if home.exists() and not args.keep:
        shutil.rmtree(home)
    private_home(home)  # 0700, whatever the caller's umask: the demo writes its files here before its server runs
    args.home = str(home)
    sample = Path(str(resources.files("engram.samples").joinpath(SAMPLE)))
    print(f"engram demo: home {home} (fresh), sample conversation {sample.name}")
    started = time.perf_counter()
    mem = client(args)
    finished = False
    try:
        demo = Demo(mem, home, sample)
        for entry in SECTIONS:
            module, _, name = entry.partition(":")
            getattr(importlib.import_module(module), name)(demo)
        finished = True
    finally:
        if args.stop_server or not finished:
            mem.shutdown()
        mem.close()
    print(f"\ndemo finished in {time.perf_counter() - started:.1f}s. Explore it yourself ("
          + ("the first command starts the demo home's server again" if args.stop_server else
             f"the demo home's server keeps running at {mem.url}") + "; `engram down` stops it):")
    print(f"  ENGRAM_HOME={home} .venv/bin/engram sql \"SELECT type, count(*) FROM events GROUP BY type\"")
    print(f"  ENGRAM_HOME={home} .venv/bin/engram status")
    for note in demo.notes:
        print(f"  {note}")
    print()
    inspector_file = getattr(demo, "inspector_file", None)
    if not args.stop_server:
        from engram.inspect.web import page_url

        print(f"The inspector of the demo agent, served: {page_url(mem.url, demo.agent, demo.discussion)}  (open it "
              "in a browser while the server runs: it stops after server.idleTimeoutSeconds without a request)")
    if inspector_file is not None:
        print(f"The inspector as one file: {inspector_file}  (opens from disk with no network)")
    sys.stdout.flush()
    return 0


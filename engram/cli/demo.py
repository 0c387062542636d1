"""`engram demo`: the main job on the embedded default, on a conversation shipped with engram.

Each part of engram adds a section (a function taking the `Demo`) to SECTIONS.
"""

from __future__ import annotations

import shutil
import sys
import time
from importlib import resources
from pathlib import Path

from engram.cli.common import open_engram, print_rows
from engram.config.service import load_service_config

SAMPLE = "acme-dashboard.jsonl"
AGENT = "demo-agent"

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
    def __init__(self, mem, config, sample: Path):
        self.mem, self.config, self.sample = mem, config, sample
        self.agent = AGENT
        self.notes: list[str] = []

    def heading(self, text: str) -> None:
        print(f"\n== {text} " + "=" * max(0, 70 - len(text)))

    def sql(self, query: str, fmt: str = "table") -> list[tuple]:
        print(f"$ engram sql \"{query}\"")
        names, rows = self.mem.sql(query)
        print_rows(names, rows, fmt)
        return rows


def register(sub) -> None:
    p = sub.add_parser("demo", help="run engram end to end on a sample conversation (fresh demo home)")
    p.add_argument("--keep", action="store_true", help="keep the demo home's previous contents")
    p.set_defaults(func=run)


def run(args) -> int:
    import importlib

    home = Path(args.home or ".engram-demo").resolve()
    if home.exists() and not args.keep:
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    args.home = str(home)
    config = load_service_config(home)
    sample = Path(str(resources.files("engram.samples").joinpath(SAMPLE)))
    print(f"engram demo: home {home} (fresh), sample conversation {sample.name}")
    started = time.perf_counter()
    with open_engram(args, config) as mem:
        demo = Demo(mem, config, sample)
        for entry in SECTIONS:
            module, _, name = entry.partition(":")
            getattr(importlib.import_module(module), name)(demo)
    print(f"\ndemo finished in {time.perf_counter() - started:.1f}s. Explore it yourself:")
    print(f"  ENGRAM_HOME={home} .venv/bin/engram sql \"SELECT type, count(*) FROM events GROUP BY type\"")
    print(f"  ENGRAM_HOME={home} .venv/bin/engram status")
    for note in demo.notes:
        print(f"  {note}")
    inspector_file = getattr(demo, "inspector_file", None)
    if inspector_file is not None:
        print(f"\nThe inspector of the demo agent: {inspector_file}  (open it in a browser)")
    sys.stdout.flush()
    return 0

"""The demo's last section: the web inspector of the demo agent, written as one HTML file in the demo home."""

from __future__ import annotations

from pathlib import Path

from engram.inspect.adapter import EngramReader
from engram.inspect.api import Inspector
from engram.inspect.page import report_html
from engram.inspect.recall import default_queries
from engram.kernel.private import write_private

FILE_NAME = "inspector.html"


def inspector(demo) -> None:
    demo.heading("The inspector: what the demo agent remembers, how strongly, and why")
    reader = EngramReader(demo.mem)
    queries = default_queries(reader, demo.agent, demo.discussion)
    path = Path(demo.home) / FILE_NAME
    html = report_html(Inspector(reader), demo.agent, demo.discussion, queries, home=str(demo.home))
    write_private(path, html)  # the agent's conversations: its owner's alone, as everything in the home
    print(f"$ engram inspect --agent {demo.agent} --discussion {demo.discussion} --out {path}")
    print(f"wrote {path} ({len(html.encode()) / 1e6:.1f} MB): timeline, forgetting curves, trace graph, a recall explained "
          f"({len(queries)} query), working memory and context, discussion memory; it opens with no network")
    demo.inspector_file = path

"""The inspector on an agent with 10,000 traces: time of each view's answer and of a whole report file, and sizes.

A synthetic home (tests/inspect/synthetic.py: traces with temporal and shared-entity edges, a schema cluster per
50 traces, retrievals of every tenth, 20,000 messages) is made without Ray through the real log and projections,
with the hashing embedder (the inspector's cost does not depend on the embedder). The views are asked through
the adapter that reads the home's files (`HomeFilesReader`), as `engram inspect --no-recall` does.

    .venv/bin/python bench/inspector.py [--traces 10000] [--messages 20000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.config.service import load_service_config  # noqa: E402
from engram.inspect.adapter import HomeFilesReader  # noqa: E402
from engram.inspect.api import Inspector  # noqa: E402
from engram.inspect.page import report_html  # noqa: E402
from tests.inspect.synthetic import AGENT, DISCUSSION, large_home  # noqa: E402


def timed(fn, repeat: int = 3) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return round(statistics.median(times) * 1000, 1), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--traces", type=int, default=10_000)
    ap.add_argument("--messages", type=int, default=20_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="engram-bench-inspect-") as tmp:
        t = time.perf_counter()
        home = large_home(Path(tmp), traces=args.traces, messages=args.messages)
        build_s = time.perf_counter() - t
        reader = HomeFilesReader(load_service_config(home))
        inspector = Inspector(reader)
        ask = lambda view, **p: (lambda: inspector.get(view, {k: str(v) for k, v in p.items()}))
        views = {
            "overview": ask("overview", agent=AGENT),
            "timeline": ask("timeline", agent=AGENT, discussion=DISCUSSION),
            "lineage": ask("lineage", agent=AGENT, seq=args.messages + 10),
            "forgetting": ask("forgetting", agent=AGENT),
            "curve": ask("curve", agent=AGENT, trace="t0"),
            "traces_page": ask("traces", agent=AGENT, offset=5_000),
            "graph": ask("graph", agent=AGENT),
            "working": ask("working", agent=AGENT, discussion=DISCUSSION),
            "discussion": ask("discussion", agent=AGENT, discussion=DISCUSSION),
            "messages_page": ask("messages", agent=AGENT, discussion=DISCUSSION, offset=10_000),
        }
        ms, sizes = {}, {}
        for name, fn in views.items():
            ms[name], answer = timed(fn)
            sizes[name] = len(json.dumps(answer, default=str))
        graph = views["graph"]()
        t = time.perf_counter()
        html = report_html(inspector, AGENT, DISCUSSION, [], home=str(home))
        report_s = time.perf_counter() - t
        reader.close()
    print(json.dumps({
        "benchmark": "inspect",
        "traces": args.traces + args.traces // 50,
        "messages": args.messages,
        "home_build_s": round(build_s, 1),
        "view_ms_median_of_3": ms,
        "answer_bytes": sizes,
        "graph": {"nodes_shown": len(graph["nodes"]), "of": graph["total_nodes"], "edges_shown": len(graph["edges"]),
                  "clusters": len(graph["clusters"])},
        "report_file": {"seconds": round(report_s, 2), "megabytes": round(len(html.encode()) / 1e6, 2)},
    }, indent=1))


if __name__ == "__main__":
    main()

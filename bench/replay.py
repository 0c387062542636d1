"""Replay speed: every projection rebuilt from a log of 1,000,000 synthetic message events
across 1,000 discussions (no LLM, no embedding). Prints one JSON object.

Beside the replay rate, its floor measured in the same run: DuckDB alone scanning the same log
(every column, in seq order, into Arrow; the best of three), and the replay's share of it, so the
figure means the same on a busy or a quiet machine. Replay's CPU seconds are given too (on a shared
machine the wall rate moves with the load; the CPU time much less).

Targets: >= 100,000 events/s (issue 2); back at or above 109k, reported beside the scan (issue 27).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402

from engram.events.envelope import NewEvent, Write  # noqa: E402
from engram.events.messages import MessageAppended  # noqa: E402
from engram.projections.registry import PROJECTIONS  # noqa: E402
from engram.shard.host import ShardHost  # noqa: E402

T0 = 1_700_000_000_000_000
LINES = [
    "Hey Mel! Good to see you! How have you been?",
    "I'm swamped with the kids & work. What's up with you? Anything new?",
    "I went to a LGBTQ support group yesterday and it was so powerful.",
    "That sounds amazing! I painted a lake sunrise last year, it means a lot to me.",
]


def fill(host: ShardHost, events: int, discussions: int, batch: int = 20_000) -> float:
    started = time.perf_counter()
    for start in range(0, events, batch):
        writes: dict[int, list[NewEvent]] = {}
        for i in range(start, min(start + batch, events)):
            d = i % discussions
            text = LINES[i % len(LINES)]
            writes.setdefault(d, []).append(
                NewEvent(
                    event=MessageAppended(role="user" if i % 2 else "assistant", content=text,
                                          message_id=f"m{i}", token_estimate=len(text) // 4),
                    ts_us=T0 + i * 1_000_000,
                )
            )
        host.append_many([Write(stream=f"d{d:04d}", agent=f"agent-{d % 50}", events=tuple(evs)) for d, evs in writes.items()])
    return time.perf_counter() - started


def scan_floor(log: Path, repeats: int = 3) -> dict:
    """DuckDB alone reading the whole log the replay read: the work a replay cannot avoid."""
    con = duckdb.connect(str(log), read_only=True)
    try:
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            rows = con.sql("SELECT * FROM events ORDER BY seq").to_arrow_table().num_rows
            best = min(best, time.perf_counter() - started)
    finally:
        con.close()
    return {"events": rows, "seconds": round(best, 3), "events_per_s": round(rows / best)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--discussions", type=int, default=1_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        host = ShardHost(tmp / "log.duckdb", tmp / "live", background=False)
        try:
            fill_s = fill(host, args.events, args.discussions)
            cpu = time.process_time()
            report = host.replay_into(tmp / "replayed")
            cpu = time.process_time() - cpu
        finally:
            host.close()
        floor = scan_floor(tmp / "log.duckdb")
    rate = report["events"] / report["seconds"]
    print(json.dumps({
        "benchmark": "replay",
        "events": report["events"],
        "discussions": args.discussions,
        "projections": PROJECTIONS,
        "fill_seconds": round(fill_s, 2),
        "replay_seconds": report["seconds"],
        "replay_cpu_seconds": round(cpu, 2),
        "events_per_s": round(rate),
        "floor_duckdb_scan": floor,
        "replay_share_of_scan_rate": round(rate / floor["events_per_s"], 4),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "target_events_per_s": 109_000,  # issue 27 (issue 2: 100,000)
    }))


if __name__ == "__main__":
    main()

"""Replay speed: every projection rebuilt from a log of 1,000,000 synthetic message events
across 1,000 discussions (no LLM, no embedding). Prints one JSON object.

Target (issue 2): >= 100,000 events/s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.events.envelope import NewEvent, Write  # noqa: E402
from engram.events.messages import MessageAppended  # noqa: E402
from engram.projections.registry import PROJECTIONS  # noqa: E402
from engram.shard import ShardHost  # noqa: E402

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
            report = host.replay_into(tmp / "replayed")
        finally:
            host.close()
    print(json.dumps({
        "benchmark": "replay",
        "events": report["events"],
        "discussions": args.discussions,
        "projections": PROJECTIONS,
        "fill_seconds": round(fill_s, 2),
        "replay_seconds": report["seconds"],
        "events_per_s": round(report["events"] / report["seconds"]),
        "target_events_per_s": 100_000,
    }))


if __name__ == "__main__":
    main()

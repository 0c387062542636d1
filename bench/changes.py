""""When did X change": recall as of a time, on facts that change over the LoCoMo dev conversations.

    .venv/bin/python bench/changes.py [LOCOMO_JSON] [--home DIR] [--runtime ray|inprocess] [--k 10]

Issue 24 item 3's measure beside LoCoMo's temporal questions. The questions below are written here, by reading the
three dev conversations (`shared/data/locomo/locomo-dev.json`) for a state that a later session changes (a job, a
business, an adoption, a pet); nothing is tuned to them. Each names the turn(s) that state the old state and the
turn(s) that state the new one. Every conversation is ingested through engram as `bench/recall.py` ingests it
(its own agent, each session at its date); then each question is asked with `engram recall` (record=False, so
the questions do not reinforce one another):

- as of one second before the new state was said (`as_of`): is the old state among the top k (`old_then`), and is
  the new one absent (`new_leaks_then`, must be 0: it was not said yet);
- now (a day after the last session): is the new state among the top k (`new_now`), is the old one still there
  (`old_now`), and if so, does recall say it was superseded (`old_now_marked`: its `valid_to` is set);
- `old_closed`: of the traces made from the old-state turns, the share whose validity engram closed (it noticed
  the change by itself: a correction or contradiction between the two).

Figures are the share of questions (evidence counts when any of its turns is among the hits). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engram.evaluation import locomo  # noqa: E402

DAY_US = 86_400 * 1_000_000
SECOND_US = 1_000_000


@dataclass(frozen=True)
class Change:
    sample_id: str
    question: str
    old: tuple[str, ...]  # turns that say the state before
    new: tuple[str, ...]  # turns that say it changed


CHANGES = (
    Change("conv-26", "Where is Caroline in the adoption process?", ("D2:8",), ("D13:1",)),
    Change("conv-26", "Has Caroline passed the adoption agency interviews?", ("D13:1",), ("D19:1",)),
    Change("conv-30", "What is Jon doing for work?", ("D1:4",), ("D18:2",)),
    Change("conv-30", "Is Gina's online clothes store open yet?", ("D2:1",), ("D6:6",)),
    Change("conv-30", "How is Jon's dance studio doing?", ("D11:3",), ("D18:2",)),
    Change("conv-41", "What is John's position at work?", ("D19:8",), ("D28:1",)),
    Change("conv-41", "Where does John work now?", ("D25:1",), ("D28:5",)),
    Change("conv-41", "Does Maria have a dog?", ("D17:12",), ("D30:1",)),
)


def turn_times(path: Path) -> dict[str, dict[str, int]]:
    from engram.memory.ingest.formats import parse_file

    return {c.discussion: {m.message_id: m.ts_us for m in c.messages} for c in parse_file(path, fmt="locomo", now_us=0)}


def measure(home: Path, path: Path, runtime: str, k: int) -> dict:
    from engram.api.types import RecallRequest
    from engram.boot.embedded import Engram
    from engram.events.envelope import from_us
    from recall import agent_of

    times = turn_times(path)
    mem = Engram.open(home, runtime=runtime)
    try:
        rows = []
        for c in CHANGES:
            agent = agent_of(c.sample_id)
            now = max(times[c.sample_id].values()) + DAY_US
            then = min(times[c.sample_id][d] for d in c.new) - SECOND_US

            def ask(at_us: int, as_of_us: int | None):
                options = {"as_of": from_us(as_of_us)} if as_of_us is not None else {}
                return mem.recall(agent, RecallRequest(query=c.question, discussion=c.sample_id, limit=k, record=False,
                                                       at=from_us(at_us), sources=False, **options)).hits

            def holds(hits, turns) -> list:
                return [h for h in hits if set(h.source_message_ids) & set(turns)]

            before, after = ask(now, then), ask(now, None)
            _, closed = mem.sql(
                "SELECT count(*), count(*) FILTER (WHERE valid_to IS NOT NULL) FROM memory_traces WHERE agent = ? "
                "AND len(list_intersect(source_message_ids, ?::VARCHAR[])) > 0", [agent, list(c.old)])
            old_now = holds(after, c.old)
            rows.append({
                "conversation": c.sample_id, "question": c.question,
                "old_then": bool(holds(before, c.old)), "new_leaks_then": bool(holds(before, c.new)),
                "new_now": bool(holds(after, c.new)), "old_now": bool(old_now),
                "old_now_marked": bool(old_now) and all(h.valid_to for h in old_now),
                "old_traces": closed[0][0], "old_closed": closed[0][1],
            })
        n = len(rows)

        def share(key: str) -> float:
            return round(100 * sum(r[key] for r in rows) / n, 1)

        old_traces = sum(r["old_traces"] for r in rows)
        return {
            "questions": n, "k": k,
            **{f"{key}_pct": share(key) for key in ("old_then", "new_leaks_then", "new_now", "old_now", "old_now_marked")},
            "old_closed_pct": round(100 * sum(r["old_closed"] for r in rows) / old_traces, 1) if old_traces else None,
            "rows": rows,
        }
    finally:
        mem.close()


def main(argv=None) -> int:
    from recall import ingest

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("locomo", nargs="?", default=str(locomo.DEFAULT_PATH))
    p.add_argument("--home", help="an ingested home to reuse (default: a fresh one, ingested now)")
    p.add_argument("--runtime", choices=("ray", "inprocess"), default="inprocess")
    p.add_argument("--k", type=int, default=10)
    args = p.parse_args(argv)
    path = Path(args.locomo)
    tmp = None
    if args.home:
        home = Path(args.home)
        ingest_s = None
    else:
        tmp = Path(tempfile.mkdtemp(prefix="engram-changes-"))
        home = tmp / "home"
        started = time.perf_counter()
        ingest(path, home, runtime=args.runtime)
        ingest_s = round(time.perf_counter() - started, 1)
    try:
        report = measure(home, path, args.runtime, args.k)
        print(json.dumps({"bench": "changes", "runtime": args.runtime, "ingest_s": ingest_s, **report}, indent=1))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

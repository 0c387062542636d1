"""Order-independent import on LoCoMo dev: one agent, its conversations ingested in every order. Prints one JSON object.

    .venv/bin/python bench/import_order.py [LOCOMO_JSON] [--orders all|file] [--no-recall] [--keep DIR]

The three dev conversations (conv-26, conv-30, conv-41: overlapping months of 2022-2023) go into ONE agent,
each as its own discussion, on local Ray with the offline provider and the default embedder:

- in each of the 6 orders of the conversations, one conversation at a time (each appended whole, then the
  memory catches up before the next one: what `engram ingest` of three files does), and
- interleaved by time (every message in event-time order, as if the three had been live at once: the
  reference).

For each run: the set of active traces when the memory has caught up, each trace keyed by what it is
(its discussion, the dialog ids it was made from, its content; trace ids contain log positions, which
differ between orders by construction); its Jaccard similarity with the interleaved run's set; traces
encoded, active and pruned per conversation; ClockTick and ConsolidationRan events; and evidence
recall@k (`engram.evaluation.locomo`, the protocol of shared/data/README.md) with every question asked of
the one agent, scoped to its discussion, at the agent's present (a day after the latest session of any
conversation).

Bounded time (issue 13): after the file-order run, one message dated a year after the last session
(an "undated" message stamped with a much later clock) is appended to conv-26; reported: the ClockTick
and ConsolidationRan events and the TracePruned / TraceReinforced decisions it caused, and the active
traces before and after.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.evaluation import locomo  # noqa: E402
from engram.evaluation.locomo import Hit  # noqa: E402

AGENT = "locomo"
DAY_US = 86_400 * 1_000_000


def hit(h) -> Hit:
    """A recalled memory as a prompt would show it: its context (for a reply, the question it answers) and its
    content, mapped to the dialog ids of both (their recorded provenance)."""
    text = f"{h.context}\n{h.content}" if h.context else h.content
    return Hit(frozenset(h.source_message_ids) | frozenset(h.context_message_ids), text)
YEAR_US = 365 * DAY_US


def conversations(path: Path):
    from engram.memory.ingest.formats import parse_file

    return {c.discussion: c for c in parse_file(path, fmt="locomo", now_us=0)}


def writes_in_order(convs: dict, order: tuple[str, ...]):
    """One Write per conversation, in `order`."""
    from engram.memory.ingest.messages import discussion_write

    return [[discussion_write(AGENT, cid, convs[cid].messages, max_message_chars=100_000)] for cid in order]


def writes_interleaved(convs: dict):
    """Every message in event-time order, as runs of one discussion each (one append: the log order is time order)."""
    from engram.memory.ingest.messages import IncomingMessage, discussion_write

    tagged = sorted(
        ((m.ts_us, cid, k, m) for cid, c in convs.items() for k, m in enumerate(c.messages)),
        key=lambda x: (x[0], x[1], x[2]),
    )
    runs: list[tuple[str, list[IncomingMessage]]] = []
    for _, cid, _, m in tagged:
        if runs and runs[-1][0] == cid:
            runs[-1][1].append(m)
        else:
            runs.append((cid, [m]))
    return [[discussion_write(AGENT, cid, msgs, max_message_chars=100_000) for cid, msgs in runs]]


def counts(mem) -> dict:
    """Events by type; reviews (`TraceReinforced`) counted one per trace through `ev_trace_reinforced`, since a
    boundary's reviews of a discussion are recorded as one `TracesReinforced` (`engram.events.compact`)."""
    _, rows = mem.sql("SELECT type, count(*) FROM events WHERE agent = ? GROUP BY type ORDER BY type", [AGENT])
    out = dict(rows)
    _, rows = mem.sql("SELECT count(*) FROM ev_trace_reinforced WHERE agent = ?", [AGENT])
    out["TraceReinforced"] = rows[0][0]
    out.pop("TracesReinforced", None)
    return out


def active_set(mem) -> set[tuple]:
    _, rows = mem.sql(
        "SELECT stream, source_message_ids, content FROM memory_traces WHERE agent = ? AND active", [AGENT]
    )
    return {(s, tuple(ids or ()), c) for s, ids, c in rows}


def per_conversation(mem) -> dict:
    _, rows = mem.sql(
        "SELECT stream, count(*), count(*) FILTER (WHERE active), count(*) FILTER (WHERE deleted_reason = 'decay'), "
        "count(*) FILTER (WHERE NOT active AND deleted_reason <> 'decay') "
        "FROM memory_traces WHERE agent = ? GROUP BY stream ORDER BY stream", [AGENT]
    )
    return {s: {"traces": n, "active": a, "pruned": p, "superseded_or_other": o} for s, n, a, p, o in rows}


def evaluate_recall(mem, items, present_us: int) -> dict:
    def retrieve(item, k):
        mem.sync_settings(AGENT)
        result = mem.rt.recall(AGENT, item.question, min_position=0, now_us=present_us, discussion=item.sample_id,
                               limit=k)
        return [hit(h) for h in result.hits]

    r = locomo.evaluate(items, retrieve)
    return {k: r[k] for k in ("recall@5", "recall@10", "recall@25", "tokens@10", "per_category")}


def run_order(name: str, batches, home: Path, items, present_us: int, recall: bool) -> tuple[dict, set]:
    from engram.boot.embedded import Engram

    started = time.perf_counter()
    mem = Engram.open(home)
    try:
        first_ts = min(e.ts_us for batch in batches for w in batch for e in w.events)
        mem.sync_settings(AGENT, ts_us=first_ts)
        for batch in batches:
            mem.append(batch)
            if not mem.wait_idle(timeout=3_600):
                raise RuntimeError(f"{name}: memory did not catch up within an hour")
        elapsed = time.perf_counter() - started
        active = active_set(mem)
        out = {
            "ingest_and_catch_up_s": round(elapsed, 1),
            "active_traces": len(active),
            "per_conversation": per_conversation(mem),
            "events": {k: v for k, v in counts(mem).items() if k in (
                "ClockTick", "ConsolidationRan", "TraceEncoded", "TracePruned", "TraceReinforced", "SchemaCreated",
                "ConflictResolved")},
        }
        if recall:
            out["recall"] = evaluate_recall(mem, items, present_us)
        return out, active
    finally:
        mem.close()


def bounded_time(home: Path, last_us: int) -> dict:
    """One message a year after the last session, into a memory that has caught up."""
    from engram.boot.embedded import Engram
    from engram.memory.ingest.messages import IncomingMessage, discussion_write

    mem = Engram.open(home)
    try:
        before, active_before = counts(mem), len(active_set(mem))
        late = last_us + YEAR_US
        msg = IncomingMessage(role="user", content="Hi again, it has been a while. How are you?", ts_us=late,
                              name="Caroline", message_id="late-1")
        started = time.perf_counter()
        mem.append([discussion_write(AGENT, "conv-26", [msg], max_message_chars=100_000)])
        if not mem.wait_idle(timeout=3_600):
            raise RuntimeError("bounded time: memory did not catch up within an hour")
        elapsed = time.perf_counter() - started
        after, active_after = counts(mem), len(active_set(mem))
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(after) | set(before))}
        return {
            "message_after_days": 365,
            "catch_up_s": round(elapsed, 1),
            "events_caused": {k: v for k, v in delta.items() if v},
            "active_traces_before": active_before,
            "active_traces_after": active_after,
        }
    finally:
        mem.close()


def jaccard(a: set, b: set) -> float:
    return round(len(a & b) / max(1, len(a | b)), 4)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(locomo.DEFAULT_PATH))
    ap.add_argument("--orders", choices=("all", "file"), default="all",
                    help="all: the 6 orders and interleaved; file: the file's order and interleaved")
    ap.add_argument("--no-recall", action="store_true")
    ap.add_argument("--keep", help="keep the homes under this directory (default: a temporary one, removed)")
    args = ap.parse_args(argv)
    path = Path(args.path)
    data = locomo.load(path)
    items = [it for s in data for it in locomo.qa_items(s)]
    convs = conversations(path)
    ids = tuple(convs)
    last_us = max(m.ts_us for c in convs.values() for m in c.messages)
    present_us = last_us + DAY_US
    orders = list(itertools.permutations(ids)) if args.orders == "all" else [ids]
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="engram-bench-order-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: dict[str, dict] = {}
    sets: dict[str, set] = {}
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    try:
        name = "interleaved by time"
        runs[name], sets[name] = run_order(name, writes_interleaved(convs), work / "interleaved", items, present_us,
                                           not args.no_recall)
        for order in orders:
            name = " > ".join(order)
            home = work / "-".join(order)
            runs[name], sets[name] = run_order(name, writes_in_order(convs, order), home, items, present_us,
                                               not args.no_recall)
        reference = sets["interleaved by time"]
        for name in runs:
            runs[name]["jaccard_with_interleaved"] = jaccard(sets[name], reference)
        names = list(sets)
        pairs = [jaccard(sets[a], sets[b]) for a, b in itertools.combinations(names, 2)]
        file_order = " > ".join(ids)
        out = {
            "benchmark": "import order (one agent, LoCoMo dev)",
            "load_average_at_start_and_end": [load_at_start, [round(x, 2) for x in os.getloadavg()]],
            "data": str(path),
            "conversations": list(ids),
            "messages": sum(len(c.messages) for c in convs.values()),
            "items": len(items),
            "jaccard": {
                "min_over_all_pairs": min(pairs) if pairs else 1.0,
                "min_with_interleaved": min(r["jaccard_with_interleaved"] for r in runs.values()),
                "runs_identical_to_interleaved": sum(1 for n in names if sets[n] == reference) - 1,
                "runs": len(names) - 1,
            },
            "runs": runs,
            "bounded_time": bounded_time(work / "-".join(ids), last_us) if file_order in runs else None,
        }
        print(json.dumps(out, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

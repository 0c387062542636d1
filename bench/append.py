"""Append throughput and latency of the EventStore (group commit), beside a SQLite baseline.

Prints one JSON object:
- bulk: 8 writer threads appending 500-event writes (throughput, events/s);
- single: 8 writer threads appending one event per call (throughput; per-call latency p50/p99);
- ray_actor: 8 concurrent callers of the real EventStore Ray actor, 500-event writes;
- sqlite_baseline: one row per commit, the per-agent SQLite pattern Wunderland uses;
- ratio: bulk throughput / SQLite baseline;
- bulk.floor_duckdb_arrow_insert: the floor of bulk, measured in the same run: DuckDB alone inserting the
  same rows (read back from the bulk log) as Arrow batches of the store's largest group commit (20,000
  rows a transaction) into a fresh file of the same schema, the better of two; bulk.share_of_floor_rate
  is bulk's rate over it, which means the same on a busy or a quiet machine. bulk.cpu_seconds: the
  process's CPU time during bulk (on a shared machine the wall rate moves with the load; the CPU less).
Targets (issue 2): >= 100,000 events/s and >= 20x the SQLite baseline; bulk back at or above 100k,
reported beside the raw insert (issue 27).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import run_threads  # noqa: E402

from engram.events.envelope import NewEvent, Write  # noqa: E402
from engram.events.messages import MessageAppended  # noqa: E402
from engram.events.store import SCHEMA, EventStore  # noqa: E402

WRITERS = 8
T0 = 1_700_000_000_000_000
TEXT = "I went to the LGBTQ support group yesterday and it was so powerful, thanks for asking!"


def make_write(writer: int, start: int, n: int) -> Write:
    return Write(
        stream=f"discussion-{writer}",
        agent=f"agent-{writer}",
        events=tuple(
            NewEvent(
                event=MessageAppended(role="user", content=TEXT, message_id=f"w{writer}-{i}", token_estimate=22),
                ts_us=T0 + i,
                event_id=f"w{writer}-{i}",
            )
            for i in range(start, start + n)
        ),
    )


def bulk(tmp: Path, total: int, per_write: int) -> dict:
    store = EventStore(tmp / "bulk.duckdb")
    per_writer = total // WRITERS
    writes = {w: [make_write(w, s, per_write) for s in range(0, per_writer, per_write)] for w in range(WRITERS)}
    cpu = time.process_time()
    elapsed = run_threads(lambda w: [store.append_many([x]) for x in writes[w]], WRITERS)
    cpu = time.process_time() - cpu
    n = store.head()
    rows_per_commit = store.max_batch_events
    store.close()
    floor = arrow_insert_floor(tmp, tmp / "bulk.duckdb", rows_per_commit)
    rate = n / elapsed
    return {"events": n, "seconds": round(elapsed, 3), "events_per_s": round(rate), "cpu_seconds": round(cpu, 2),
            "floor_duckdb_arrow_insert": floor, "share_of_floor_rate": round(rate / floor["events_per_s"], 3)}


def arrow_insert_floor(tmp: Path, log: Path, rows_per_commit: int, repeats: int = 2) -> dict:
    """DuckDB alone inserting the rows of `log` as Arrow into a fresh file of the log's schema, `rows_per_commit`
    rows a transaction: the work an append of those rows cannot avoid."""
    con = duckdb.connect(str(log), read_only=True)
    rows = con.sql("SELECT * FROM events ORDER BY seq").to_arrow_table()
    con.close()
    best = float("inf")
    for i in range(repeats):
        target = duckdb.connect(str(tmp / f"floor-{i}.duckdb"))
        target.execute(SCHEMA)
        started = time.perf_counter()
        for start in range(0, rows.num_rows, rows_per_commit):
            target.execute("BEGIN TRANSACTION")
            target.register("_batch", rows.slice(start, rows_per_commit))
            target.execute("INSERT INTO events SELECT * FROM _batch")
            target.unregister("_batch")
            target.execute("COMMIT")
        best = min(best, time.perf_counter() - started)
        target.close()
    return {"events": rows.num_rows, "rows_per_commit": rows_per_commit, "seconds": round(best, 3),
            "events_per_s": round(rows.num_rows / best)}


def single(tmp: Path, per_writer: int) -> dict:
    store = EventStore(tmp / "single.duckdb")
    writes = {w: [make_write(w, i, 1) for i in range(per_writer)] for w in range(WRITERS)}
    latencies: list[float] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        mine = []
        for x in writes[w]:
            t = time.perf_counter()
            store.append_many([x])
            mine.append(time.perf_counter() - t)
        with lock:
            latencies.extend(mine)

    elapsed = run_threads(writer, WRITERS)
    n = store.head()
    store.close()
    q = statistics.quantiles(latencies, n=100)
    return {
        "events": n,
        "events_per_s": round(n / elapsed),
        "latency_ms_p50": round(q[49] * 1000, 3),
        "latency_ms_p99": round(q[98] * 1000, 3),
    }


def ray_actor(tmp: Path, total: int, per_write: int) -> dict:
    import ray

    from engram.actors.shard import SHARD_ACTOR_CONCURRENCY, ShardActor

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        actor = ShardActor.options(max_concurrency=SHARD_ACTOR_CONCURRENCY).remote(
            str(tmp / "ray.duckdb"), str(tmp / "ray-projections"), 0, 20_000, 1 << 20
        )
        ray.get(actor.head.remote())
        per_writer = total // WRITERS
        writes = {w: [make_write(w, s, per_write) for s in range(0, per_writer, per_write)] for w in range(WRITERS)}
        # In-flight work is bounded: each caller waits for its previous append.
        elapsed = run_threads(lambda w: [ray.get(actor.append_many.remote([x])) for x in writes[w]], WRITERS)
        n = ray.get(actor.head.remote())
        ray.get(actor.close.remote())
    finally:
        ray.shutdown()
    return {"events": n, "seconds": round(elapsed, 3), "events_per_s": round(n / elapsed)}


def sqlite_baseline(tmp: Path, n: int) -> dict:
    con = sqlite3.connect(tmp / "agent.db")
    con.execute("CREATE TABLE turns (id INTEGER PRIMARY KEY, discussion TEXT, role TEXT, content TEXT, ts INTEGER)")
    started = time.perf_counter()
    for i in range(n):
        con.execute("INSERT INTO turns (discussion, role, content, ts) VALUES (?, ?, ?, ?)", ("d", "user", TEXT, T0 + i))
        con.commit()
    elapsed = time.perf_counter() - started
    con.close()
    return {"events": n, "events_per_s": round(n / elapsed), "journal_mode": "delete", "commit": "one row per commit"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--per-write", type=int, default=500)
    ap.add_argument("--single-per-writer", type=int, default=1_000)
    ap.add_argument("--sqlite-events", type=int, default=3_000)
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        out = {"benchmark": "append", "writers": WRITERS}
        out["bulk"] = bulk(tmp, args.events, args.per_write)
        out["single"] = single(tmp, args.single_per_writer)
        out["sqlite_baseline"] = sqlite_baseline(tmp, args.sqlite_events)
        if not args.no_ray:
            out["ray_actor"] = ray_actor(tmp, args.events // 2, args.per_write)
        out["ratio_bulk_vs_sqlite"] = round(out["bulk"]["events_per_s"] / out["sqlite_baseline"]["events_per_s"], 1)
        out["ratio_single_vs_sqlite"] = round(out["single"]["events_per_s"] / out["sqlite_baseline"]["events_per_s"], 1)
        out["load_average_1m"] = round(os.getloadavg()[0], 2)
        out["targets"] = {"events_per_s": 100_000, "ratio_vs_sqlite": 20}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

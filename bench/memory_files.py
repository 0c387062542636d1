"""What a discussion's `<id>_vector_memory.db` costs to write: when the discussion's store is created (empty, at
its `MemoryFileCreated`) and when a memory is added (the whole store is written again).

    .venv/bin/python bench/memory_files.py [--discussions 200]

Two measures, each over `--discussions` new discussions:
- `write_store`: the per-file cost of `engram.memory.discussion.vectors.write_store`, alone (p50/p99/mean ms), for an empty
  store and for a store of one memory;
- `in_a_shard`: a shard (`engram.shard.host.ShardHost`, no Ray, no policies) folding, for every discussion, one message
  and the two `MemoryFileCreated` events the Summarizer records at its first memory check; the seconds each
  projection spent folding and checkpointing, per discussion (the vector-memory projection renders the store).

Every file written is opened again with DuckDB and its tables counted (a file that does not open fails the run).
Prints one JSON object; note the load average, this machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import numpy as np  # noqa: E402

from bench._common import pct  # noqa: E402

T0 = 1_767_225_600_000_000


def _row(i: int):
    from engram.memory.discussion.vectors import VectorMemoryRow

    rng = np.random.default_rng(i)
    return VectorMemoryRow(
        memory_id=f"vm-{i}", generation=0, title="Delivery window", summary="The blue parcel leaves the Porto depot.",
        entities=("Porto",), key_phrases=("blue parcel",), topics=("delivery",), sentiment="neutral", first_seq=1,
        last_seq=3, message_ids=("m0", "m1", "m2"), token_count=60, first_ts_us=T0, last_ts_us=T0 + 1, created_seq=4,
        created_ts_us=T0 + 2, mode="standard", trigger="tokens", llm_provider="offline", llm_model="offline-heuristic-v1",
        workflow=None, embedding_model="minilm", vector=rng.standard_normal(384).astype(np.float32))


def _check(path: Path, memories: int) -> None:
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = sorted(t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall())
        assert tables == ["embeddings", "hnsw_index", "memories", "store_info"], tables
        assert con.execute("SELECT count(*) FROM memories").fetchone()[0] == memories
    finally:
        con.close()


def write_store_cost(n: int, folder: Path) -> dict:
    from engram.memory.discussion.vectors import write_store

    out = {}
    for label, rows in (("empty", []), ("one_memory", [_row(0)])):
        times = []
        for i in range(n):
            path = folder / label / f"d{i}_vector_memory.db"
            info = {"discussion_id": f"d{i}", "agent": "a", "generation": "0", "reflects_seq": str(i),
                    "embedding_model": ""}
            started = time.perf_counter()
            write_store(path, rows, info)
            times.append((time.perf_counter() - started) * 1000)
            _check(path, len(rows))
        out[label] = {"files": n, "p50_ms": pct(times, 0.5), "p99_ms": pct(times, 0.99),
                      "mean_ms": round(sum(times) / n, 2)}
    return out


def in_a_shard(n: int, folder: Path) -> dict:
    from engram.events.discussion import STORE_MEMORIES, STORE_VECTOR, MemoryFileCreated
    from engram.events.envelope import NewEvent, Write
    from engram.events.messages import MessageAppended
    from engram.shard.host import ShardHost

    host = ShardHost(folder / "log.duckdb", folder / "proj", background=False)
    try:
        writes = []
        for i in range(n):
            agent, stream = f"agent-{i:04d}", f"chat-{i}"
            events = (
                NewEvent(event=MessageAppended(role="user", content=f"Order {i}: the blue parcel leaves Porto.",
                                               message_id="m0", token_estimate=10), ts_us=T0 + i, event_id=f"{i}-m0"),
                NewEvent(event=MemoryFileCreated(store=STORE_MEMORIES, message_count=1), ts_us=T0 + i, event_id=f"{i}-fm"),
                NewEvent(event=MemoryFileCreated(store=STORE_VECTOR, message_count=1), ts_us=T0 + i, event_id=f"{i}-fv"),
            )
            writes.append(Write(stream=stream, agent=agent, events=events))
        host.append_many(writes)
        started = time.perf_counter()
        host.catch_up()
        seconds = time.perf_counter() - started
        timings = host.runner.timings.report()
        files = sorted((folder / "proj").rglob("*_vector_memory.db"))
        assert len(files) == n, len(files)
        for f in files[:20]:
            _check(f, 0)
    finally:
        host.close()
    per = {name: round((t.get("fold_s", 0) + t.get("checkpoint_s", 0)) / n * 1000, 2)
           for name, t in timings.items() if name != "(log)"}
    return {"discussions": n, "seconds": round(seconds, 2), "ms_per_discussion": round(seconds / n * 1000, 2),
            "ms_per_discussion_by_projection": per}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--discussions", type=int, default=200)
    args = parser.parse_args()
    load_at_start = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="engram-memory-files-") as tmp:
        report = {"benchmark": "memory_files", "load_avg_1m_at_start": load_at_start,
                  "write_store": write_store_cost(args.discussions, Path(tmp) / "stores"),
                  "in_a_shard": in_a_shard(args.discussions, Path(tmp) / "shard")}
    report["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

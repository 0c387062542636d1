"""HNSW (engram.providers.search.hnsw.HnswIndex) against exact brute force at 10k / 100k / 1M traces of 384 dimensions.

    .venv/bin/python bench/hnsw.py [--sizes 10000,100000,1000000] [--queries 1000] [--build-threads-from 1000000]

Vectors: synthetic, shaped like sentence embeddings (384-d, L2-normalised, a two-level hierarchy of topics
and subtopics: topic ~ N(0, 1), subtopic = topic + N(0, 0.8²), point = subtopic + N(0, 1²), one topic per
1,000 and one subtopic per 50 traces), so that similarities form a continuum as real embeddings do rather
than well-separated clusters. Queries: held-out points of the same distribution. For each size: recall@10
of HNSW against the exact top 10, and the single-query latency (p50/p99) of both, each as engram calls
it (`HnswIndex.search` with its string ids; `brute_force` over the normalised matrix with numpy).

Build: engram builds indexes single-threaded (the index bytes must be reproducible on replay). At sizes of
at least --build-threads-from (default 1M) this benchmark builds with every core instead (same M,
ef_construction and seed; only the benchmark does this), and says so. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.providers.search.hnsw import HNSW_EF_CONSTRUCTION, HNSW_EF_SEARCH, HNSW_M, HnswIndex, brute_force  # noqa: E402

DIM = 384
K = 10
POINTS_PER_TOPIC = 1_000
POINTS_PER_SUBTOPIC = 50
SUBTOPIC_SPREAD = 0.8
NOISE = 1.0
CHUNK = 50_000
# engram's ef_search (HNSW_EF_SEARCH) first, then larger candidate lists: the recall/latency knob.
EF_SWEEP = (HNSW_EF_SEARCH, 128, 256)


def centres(n: int, rng: np.random.Generator) -> np.ndarray:
    topics = rng.normal(size=(max(1, n // POINTS_PER_TOPIC), DIM)).astype(np.float32)
    m = max(1, n // POINTS_PER_SUBTOPIC)
    return topics[rng.integers(0, len(topics), m)] + rng.normal(scale=SUBTOPIC_SPREAD, size=(m, DIM)).astype(np.float32)


def vectors(n: int, centres: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        x = centres[rng.integers(0, len(centres), m)] + rng.normal(scale=NOISE, size=(m, DIM)).astype(np.float32)
        out[start : start + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def build(data: np.ndarray, threads: int) -> tuple[HnswIndex, float]:
    n = len(data)
    keys = [f"t{i}" for i in range(n)]
    started = time.perf_counter()
    index = HnswIndex(DIM, capacity=n)
    if threads == 1:
        for start in range(0, n, CHUNK):
            index.add(keys[start : start + CHUNK], data[start : start + CHUNK])
    else:
        # Benchmark only: the same graph parameters, several threads (not byte-reproducible, never used for replay).
        index._index.add_items(data, np.arange(n), num_threads=threads)
        index.ids = keys
        index._labels = {k: i for i, k in enumerate(keys)}
    return index, time.perf_counter() - started


def percentiles(ms: list[float]) -> dict:
    a = np.array(ms)
    return {"p50_ms": round(float(np.percentile(a, 50)), 3), "p99_ms": round(float(np.percentile(a, 99)), 3)}


def run_size(n: int, queries: int, threads: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    c = centres(n, rng)
    data = vectors(n, c, rng)
    qs = vectors(queries, c, rng)
    index, build_s = build(data, threads)
    exact, exact_ms = [], []
    for q in qs:
        t = time.perf_counter()
        found = brute_force(data, q, K)
        exact_ms.append((time.perf_counter() - t) * 1000)
        exact.append({f"t{i}" for i, _ in found})
    sweep = {}
    for ef in EF_SWEEP:
        index.ef_search = ef
        approx_ms, hits = [], 0
        for q, truth in zip(qs, exact):
            t = time.perf_counter()
            found = index.search(q, K)
            approx_ms.append((time.perf_counter() - t) * 1000)
            hits += len(truth & {key for key, _ in found})
        sweep[ef] = {"recall@10": round(hits / (K * queries), 4), **percentiles(approx_ms)}
    hnsw, brute = sweep[HNSW_EF_SEARCH], percentiles(exact_ms)
    return {
        "traces": n,
        "queries": queries,
        "recall@10": hnsw["recall@10"],
        "hnsw": {k: hnsw[k] for k in ("p50_ms", "p99_ms")},
        "brute_force": brute,
        "speedup_p50": round(brute["p50_ms"] / hnsw["p50_ms"], 1),
        "ef_search_sweep": {str(ef): v for ef, v in sweep.items() if ef != HNSW_EF_SEARCH},
        "build_s": round(build_s, 1),
        "build_threads": threads,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--build-threads-from", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    results = []
    for n in [int(s) for s in args.sizes.split(",") if s.strip()]:
        threads = cores if n >= args.build_threads_from else 1
        results.append(run_size(n, args.queries, threads, args.seed))
    at_100k = next((r for r in results if r["traces"] == 100_000), None)
    out = {
        "benchmark": "HNSW vs exact brute force, 384-d",
        "index": {"library": "hnswlib", "M": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION, "ef_search": max(HNSW_EF_SEARCH, K), "k": K},
        "data": (
            f"synthetic 384-d unit vectors: topics (1 per {POINTS_PER_TOPIC}) > subtopics (1 per {POINTS_PER_SUBTOPIC}, "
            f"spread {SUBTOPIC_SPREAD}) > points (noise {NOISE}); held-out queries from the same distribution"
        ),
        "cores": cores,
        "results": results,
    }
    if at_100k is not None:
        out["targets_at_100k"] = {
            "recall@10>=0.95": at_100k["recall@10"] >= 0.95,
            "speedup>=20x": at_100k["speedup_p50"] >= 20,
        }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

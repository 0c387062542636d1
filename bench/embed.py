"""Benchmark of the default embedder. Prints one JSON object.

    python bench/embed.py [path/to/locomo-dev.json] [--texts N]

Texts are real chat turns from the LoCoMo file when it is present (else generated sentences).
Figures: texts per second when embedding in batches (the configured batch size), and the
latency of embedding one query at a time (p50/p95), as retrieval does. The cache is not used:
these are model computations.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path

from engram.config.llm import EmbedderConfig
from engram.providers.embeddings import make_embedder

DEFAULT_PATH = Path("/work/shared/data/locomo/locomo-dev.json")
WARMUP_TEXTS = 16
QUERIES = 200
SWEEP_BATCH_SIZES = (8, 16, 32, 64)
SWEEP_TEXTS = 256


def texts_from(path: Path, n: int) -> tuple[list[str], str]:
    if path.exists():
        data = json.loads(path.read_text())
        out = [
            turn["text"]
            for sample in data
            for key, value in sample["conversation"].items()
            if key.startswith("session_") and isinstance(value, list)
            for turn in value
        ]
        return out[:n], str(path)
    words = "memory agent remembers the conversation about painting travel family work music".split()
    return [" ".join(words[(k * 7 + j) % len(words)] for j in range(8 + k % 12)) for k in range(n)], "generated"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def main() -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", nargs="?", default=str(DEFAULT_PATH))
    parser.add_argument("--texts", type=int, default=1024)
    args = parser.parse_args()

    config = EmbedderConfig()
    embedder = make_embedder(config)
    texts, source = texts_from(Path(args.path), args.texts)
    embedder.embed(texts[:WARMUP_TEXTS])  # first-run graph optimisation is not steady state

    start, start_cpu = time.perf_counter(), time.process_time()
    embedder.embed(texts)
    batched_s, batched_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu

    latencies, cpu_latencies = [], []
    for query in texts[:QUERIES]:
        t, c = time.perf_counter(), time.process_time()
        embedder.embed([query])
        latencies.append((time.perf_counter() - t) * 1000)
        cpu_latencies.append((time.process_time() - c) * 1000)

    # Batch size against CPU time per text (CPU time is what contention on a shared machine distorts least).
    sweep = {}
    for size in SWEEP_BATCH_SIZES:
        embedder.batch_size = size
        c = time.process_time()
        embedder.embed(texts[:SWEEP_TEXTS])
        sweep[str(size)] = round((time.process_time() - c) / SWEEP_TEXTS * 1000, 3)
    embedder.batch_size = config.batch_size

    return {
        "benchmark": "embed",
        "model": embedder.name,
        "dim": embedder.dim,
        "is_fallback": embedder.is_fallback,
        "texts": len(texts),
        "texts_source": source,
        "mean_chars_per_text": round(sum(map(len, texts)) / max(1, len(texts)), 1),
        "batch_size": config.batch_size,
        "batched_texts_per_s": round(len(texts) / batched_s, 1),
        "batched_texts_per_cpu_s": round(len(texts) / batched_cpu_s, 1),
        "single_query_p50_ms": round(statistics.median(latencies), 3),
        "single_query_p95_ms": round(pct(latencies, 0.95), 3),
        "single_query_cpu_p50_ms": round(statistics.median(cpu_latencies), 3),
        "cpu_ms_per_text_by_batch_size": sweep,
        "cpus": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    print(json.dumps(main()))

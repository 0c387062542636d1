"""Evidence recall of `engram recall` on LoCoMo dev, against BM25 and dense retrieval over raw turns.

    .venv/bin/python bench/recall.py [LOCOMO_JSON] [--variants default,similarity-only] [--home DIR]

Protocol (`shared/data/README.md`, `engram.evaluation.locomo`): each conversation is ingested through
engram (turns in order, each session's turns at the session's date) as its own agent; auto-ingest turns
turns into traces; every QA item with valid evidence is asked as a query at one event time (a day after
the conversation's last session); each returned trace maps back to the dialog ids of its source messages.
The baselines index the same raw turns ("Speaker: text", photo captions included, as ingested):
BM25 (engram.search.bm25) and exact dense retrieval with the same MiniLM embedder.

Variants run in fresh homes (a recall reinforces what it returns, so variants must not share one):
  default          the agent's configured composite (memory.retrieval.weights), HyDE as configured
  similarity-only  per-call weights: similarity 1, every other factor 0 (the composite's candidates, graph off)
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.evaluation import locomo  # noqa: E402
from engram.evaluation.locomo import Hit  # noqa: E402

DAY_US = 86_400 * 1_000_000
VARIANTS = {
    "default": None,
    "similarity-only": {"similarity": 1.0, "strength": 0.0, "recency": 0.0, "emotional": 0.0, "activation": 0.0, "importance": 0.0},
}


def agent_of(sample_id: str) -> str:
    return f"locomo-{sample_id}"


def raw_turns(path: Path) -> dict[str, list[tuple[str, str, int]]]:
    """Per conversation: (dialog id, "Speaker: text", ts) as engram ingests them."""
    from engram.ingest.formats import parse_file

    out = {}
    for conv in parse_file(path, fmt="locomo", now_us=0):
        out[conv.discussion] = [(m.message_id, f"{m.name}: {m.content}", m.ts_us) for m in conv.messages]
    return out


def baselines(items_by_conv, turns, embedder) -> dict:
    from engram.search.bm25 import BM25
    from engram.search.hnsw import brute_force

    bm25_index, dense_index = {}, {}
    for conv, rows in turns.items():
        bm = BM25()
        for did, text, _ in rows:
            bm.add(did, text)
        bm25_index[conv] = bm
        dense_index[conv] = embedder.embed([text for _, text, _ in rows])
    texts = {conv: {did: text for did, text, _ in rows} for conv, rows in turns.items()}
    ids = {conv: [did for did, _, _ in rows] for conv, rows in turns.items()}
    questions = [it.question for its in items_by_conv.values() for it in its]
    qvec = dict(zip(questions, embedder.embed(questions)))

    def bm25(item, k):
        return [Hit(frozenset([did]), texts[item.sample_id][did]) for did, _ in bm25_index[item.sample_id].query(item.question, k)]

    def dense(item, k):
        found = brute_force(dense_index[item.sample_id], qvec[item.question], k)
        return [Hit(frozenset([ids[item.sample_id][i]]), texts[item.sample_id][ids[item.sample_id][i]]) for i, _ in found]

    items = [it for its in items_by_conv.values() for it in its]
    return {"bm25-raw-turns": locomo.evaluate(items, bm25), "dense-raw-turns": locomo.evaluate(items, dense)}


def run_engram(path: Path, items_by_conv, turns, weights, home: Path) -> tuple[dict, dict]:
    from engram.client import Engram
    from engram.cognition import CognitiveMemory
    from engram.ingest.formats import parse_file
    from engram.ingest.messages import discussion_write

    started = time.perf_counter()
    mem = Engram.open(home)
    try:
        convs = parse_file(path, fmt="locomo", now_us=0)
        writes = [discussion_write(agent_of(c.discussion), c.discussion, c.messages, max_message_chars=100_000) for c in convs]
        for w in writes:
            mem.sync_settings(w.agent, ts_us=w.events[0].ts_us)
        mem.append(writes)
        if not mem.wait_idle(timeout=3_600):
            raise RuntimeError("memory did not catch up within an hour")
        ingest_s = time.perf_counter() - started
        cog = CognitiveMemory(mem)
        _, rows = mem.sql(
            "SELECT agent, count(*), count(DISTINCT source_message_ids[1]) FROM memory_traces WHERE active GROUP BY agent"
        )
        stats = {a: {"traces": n, "messages_with_traces": m} for a, n, m in rows}
        latencies = []
        query_time = {conv: max(ts for _, _, ts in rows) + DAY_US for conv, rows in turns.items()}

        def retrieve(item, k):
            t = time.perf_counter()
            result = cog.recall(
                agent_of(item.sample_id), item.question, discussion=item.sample_id, limit=k, weights=weights,
                now_us=query_time[item.sample_id], fresh=False,
            )
            latencies.append(time.perf_counter() - t)
            return [Hit(frozenset(h.source_message_ids), h.content) for h in result.hits]

        items = [it for its in items_by_conv.values() for it in its]
        report = locomo.evaluate(items, retrieve)
        lat = np.array(latencies) * 1000
        info = {
            "ingest_and_catch_up_s": round(ingest_s, 1),
            "traces": stats,
            "recall_latency_ms": {"p50": round(float(np.percentile(lat, 50)), 1), "p99": round(float(np.percentile(lat, 99)), 1)},
        }
        return report, info
    finally:
        mem.close()


def coverage(items_by_conv, home_stats) -> None:
    pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(locomo.DEFAULT_PATH))
    ap.add_argument("--variants", default="default,similarity-only")
    ap.add_argument("--home", help="parent directory for the benchmark homes (default: a temporary one)")
    args = ap.parse_args(argv)
    path = Path(args.path)
    data = locomo.load(path)
    items_by_conv = {s["sample_id"]: locomo.qa_items(s) for s in data}
    turns = raw_turns(path)

    from engram.embeddings import make_embedder

    embedder = make_embedder()
    out = {
        "benchmark": "locomo-dev evidence recall",
        "data": str(path),
        "conversations": len(data),
        "turns": sum(len(r) for r in turns.values()),
        "items": sum(len(v) for v in items_by_conv.values()),
        "embedder": embedder.name,
        "published_dragon_reference": locomo.PUBLISHED_DRAGON,
    }
    out.update(baselines(items_by_conv, turns, embedder))
    parent = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="engram-bench-recall-"))
    for name in [v.strip() for v in args.variants.split(",") if v.strip()]:
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
        report, info = run_engram(path, items_by_conv, turns, VARIANTS[name], parent / name)
        out[f"engram-recall[{name}]"] = {**report, **info}
    base = max(out["bm25-raw-turns"]["recall@10"], out["dense-raw-turns"]["recall@10"])
    composite = out.get("engram-recall[default]", {}).get("recall@10")
    if composite is not None:
        out["composite_recall@10_minus_best_baseline"] = round(composite - base, 1)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

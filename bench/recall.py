"""Evidence recall of `engram recall` on LoCoMo dev, against BM25 and dense retrieval over raw turns.

    .venv/bin/python bench/recall.py [LOCOMO_JSON] [--home DIR] [--no-ablations] [--runtime ray|inprocess]
                                     [--order forward|reverse|both]

Protocol (`shared/data/README.md`, `engram.evaluation.locomo`): each conversation is ingested through
engram (turns in order, each session's turns at the session's date) as its own agent, on local Ray (`--runtime inprocess`: in this process, no Ray);
auto-ingest makes traces of the turns (episodes of the messages, facts); every QA item with valid evidence
is then asked with `engram recall` (the Python API, the agent's default configuration), all at one event
time a day after the conversation's last session; each returned trace maps back to the dialog ids of its
source messages. Each recall appends TraceRetrieved and so reinforces what it returned before the next
question is asked, exactly as in use. The QA annotations are read here only, never ingested.
Two runs, each on its own copy of the memory as ingest left it: similarity "hybrid" (engram's default:
embedding cosine fused with a BM25 match over the traces' index text) and "embedding" (the issue's literal
definition: the cosine alone), chosen per call (`similarity=`).
Baselines over the same raw turns ("Speaker: text", photo captions included, as ingested), measured in the
same run: BM25 (engram.providers.search.bm25) and exact dense retrieval with the same MiniLM embedder.
Ablations (pure core, `engram.memory.cognitive.retrieval.recall` over the same traces as folded from the log,
each question scored against the memory as it was right after ingest, i.e. without earlier questions'
reinforcement), for each similarity: the default weights, similarity alone, without HyDE, without dormant
(decay-pruned) traces, and each factor removed in turn. The gap between "default weights" here and the run above is what reinforcement by the
earlier questions changed.
Question order (`--order`): reinforcement makes a question's answer depend on the questions asked before it; "both"
runs the hybrid recall twice, in dataset order and reversed, each on its own copy of the ingested memory.
Leave one conversation out ("leave-one-conversation-out"): a figure that holds on one conversation only is not a gain.
For each conversation held out, the configuration with the best recall@10 on the other two (both orders; ties: the
first, the default) is chosen among the configurations run, and its figures on the held-out conversation are reported;
then the mean and the worst held-out conversation of recall@5, recall@10, multi-hop, open-domain (@10) and tokens@10.
With one configuration (the default; the choice among the alternatives was made by the same rule in the issue-24
research, docs/recall.md) the held-out figures are its per-conversation figures.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.evaluation import locomo  # noqa: E402
from engram.evaluation.locomo import Hit  # noqa: E402

DAY_US = 86_400 * 1_000_000


def hit(h) -> Hit:
    """A recalled memory as a prompt shows it (`shown`: its context, for a reply the question it answers, and its
    content, shaped by engram.memory.cognitive.shown), mapped to the dialog ids of both (their recorded provenance)."""
    return Hit(frozenset(h.source_message_ids) | frozenset(h.context_message_ids), h.shown)


def agent_of(sample_id: str) -> str:
    return f"locomo-{sample_id}"


def raw_turns(path: Path) -> dict[str, list[tuple[str, str, int]]]:
    """Per conversation: (dialog id, "Speaker: text", ts) as engram ingests them."""
    from engram.memory.ingest.formats import parse_file

    out = {}
    for conv in parse_file(path, fmt="locomo", now_us=0):
        out[conv.discussion] = [(m.message_id, f"{m.name}: {m.content}", m.ts_us) for m in conv.messages]
    return out


def baselines(items_by_conv, turns, embedder) -> dict:
    from engram.providers.search.bm25 import BM25
    from engram.providers.search.hnsw import brute_force

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


def ingest(path: Path, home: Path, runtime: str = "ray") -> tuple[float, dict]:
    """Every conversation through engram (its own agent), until the memory has caught up; then closed."""
    from engram.boot.embedded import Engram
    from engram.memory.ingest.formats import parse_file
    from engram.memory.ingest.messages import discussion_write

    started = time.perf_counter()
    mem = Engram.open(home, runtime=runtime)
    try:
        convs = parse_file(path, fmt="locomo", now_us=0)
        writes = [discussion_write(agent_of(c.discussion), c.discussion, c.messages, max_message_chars=100_000) for c in convs]
        for w in writes:
            mem.sync_settings(w.agent, ts_us=w.events[0].ts_us)
        mem.append(writes)
        if not mem.wait_idle(timeout=3_600):
            raise RuntimeError("memory did not catch up within an hour")
        elapsed = time.perf_counter() - started
        _, rows = mem.sql(
            "SELECT agent, count(*), count(DISTINCT source_message_ids[1]), count(*) FILTER (WHERE context <> '') "
            "FROM memory_traces WHERE active GROUP BY agent ORDER BY agent"
        )
        stats = {a: {"traces": n, "messages_with_traces": m, "traces_with_reply_context": c} for a, n, m, c in rows}
        return elapsed, stats
    finally:
        mem.close()


def run_engram(home: Path, items_by_conv, turns, similarity: str, runtime: str = "ray", order: str = "forward",
               rows: dict | None = None) -> tuple[dict, dict]:
    """All questions in `order` through `engram recall` (the Python API) with `similarity`; each recall reinforces.
    `rows` (optional) receives each item's hits (item -> list of Hit), for the per-conversation figures."""
    from engram.api.types import RecallRequest
    from engram.boot.embedded import Engram
    from engram.events.envelope import from_us

    mem = Engram.open(home, runtime=runtime)
    try:
        latencies = []
        query_time = {conv: max(ts for _, _, ts in rows) + DAY_US for conv, rows in turns.items()}

        def retrieve(item, k):
            t = time.perf_counter()
            result = mem.recall(agent_of(item.sample_id), RecallRequest(
                query=item.question, discussion=item.sample_id, limit=k, at=from_us(query_time[item.sample_id]),
                similarity=similarity, sources=False))
            latencies.append(time.perf_counter() - t)
            hits = [hit(h) for h in result.hits]
            if rows is not None:
                rows[item] = hits
            return hits

        items = [it for its in items_by_conv.values() for it in its]
        if order == "reverse":
            items.reverse()
        if not mem.wait_idle(timeout=3_600):  # the trace readers have folded the log before the first question
            raise RuntimeError("memory did not catch up within an hour")
        report = locomo.evaluate(items, retrieve)
        lat = np.array(latencies) * 1000
        info = {"recall_latency_ms": {"p50": round(float(np.percentile(lat, 50)), 1), "p99": round(float(np.percentile(lat, 99)), 1)}}
        return report, info
    finally:
        mem.close()


def evidence_coverage(data, home: Path) -> dict:
    """How much of the evidence any trace was made from: the ceiling of evidence recall."""
    import duckdb

    con = duckdb.connect(str(home / "projections" / "shard-000.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT agent, source_message_ids FROM memory_traces").fetchall()
    finally:
        con.close()
    covered: dict[str, set] = {}
    for agent, ids in rows:
        covered.setdefault(agent, set()).update(ids)
    total = hit = 0
    for s in data:
        c = covered.get(agent_of(s["sample_id"]), set())
        for it in locomo.qa_items(s):
            total += len(it.evidence)
            hit += len(it.evidence & c)
    return {"evidence_ids_with_a_trace_pct": round(100 * hit / max(total, 1), 1)}


def ablations(home: Path, items_by_conv, turns, embedder) -> dict:
    """The composite's factors one by one, on the memory right after ingest (pure core, no Ray), for each similarity."""
    from engram.memory.cognitive.memory import AgentMemory
    from engram.memory.cognitive.personality import Pad
    from engram.memory.cognitive.retrieval import DormantSettings, FeedbackSettings, RecallQuery, RecallSettings, recall
    from engram.memory.cognitive.scoring import FACTORS, Factors
    from engram.config.agent import AgentConfig
    from engram.events.store import EventStore
    from engram.providers.llm.factory import make_tasks

    store = EventStore(home / "log" / "shard-000.duckdb", read_only=True)
    try:
        recs = [r for r in store.iter_events() if r.type != "TraceRetrieved"]
    finally:
        store.close()
    memories: dict[str, AgentMemory] = {}
    for agent in {r.agent for r in recs}:
        memories[agent] = AgentMemory(agent, embedder.dim, dormant=True)  # as the trace reader keeps it
        memories[agent].apply_batch([r for r in recs if r.agent == agent], embedder.embed)
    settings = RecallSettings.of(AgentConfig())
    items = [it for its in items_by_conv.values() for it in its]
    tasks = make_tasks()
    questions = [it.question for it in items]
    hypotheses = [tasks.hyde(q).value or q for q in questions]
    # The query is embedded as the reader embeds it: focused on the agent's own uncommon words.
    focused = {(it.sample_id, it.question): memories[agent_of(it.sample_id)].lexical.focus(it.question, settings.focus_common_share)
               for it in items}
    qv = dict(zip(focused, embedder.embed(list(focused.values()))))
    raw = dict(zip(questions, embedder.embed(questions)))
    hv = dict(zip(questions, embedder.embed(hypotheses)))
    hyde_text = dict(zip(questions, hypotheses))
    query_time = {conv: max(ts for _, _, ts in rows) + DAY_US for conv, rows in turns.items()}

    def run(weights: Factors, similarity: str, hyde: bool = True, feedback: bool = True, focus: bool = True,
            dormant: bool = True) -> dict:
        cpu = []

        def retrieve(item, k):
            m = memories[agent_of(item.sample_id)]
            started = time.process_time()
            asked = RecallQuery(
                item.question, qv[(item.sample_id, item.question)] if focus else raw[item.question],
                query_time[item.sample_id], Pad(), limit=k, discussion=item.sample_id,
                focus=focused[(item.sample_id, item.question)], hyde_text=hyde_text[item.question] if hyde else "",
                hyde_vector=hv[item.question] if hyde else None,
            )
            res = recall(m, asked, RecallSettings(
                weights=weights, pool=settings.pool, spreading=settings.spreading, hyde=settings.hyde, similarity=similarity,
                feedback=settings.feedback if feedback else FeedbackSettings(traces=0),
                dormant=settings.dormant if dormant else DormantSettings(pool=0),
            ))
            cpu.append(time.process_time() - started)
            return [hit(h) for h in res.hits]

        r = locomo.evaluate(items, retrieve)
        # The recall's own compute (CPU time: the machine is shared), the query embedding excluded.
        return {**{k: r[k] for k in ("recall@5", "recall@10", "recall@25", "tokens@10", "per_conversation@10")},
                "recall_cpu_ms_p50": round(1000 * float(np.percentile(cpu, 50)), 1)}

    out = {}
    for similarity in ("hybrid", "embedding"):
        out[similarity] = section = {
            "default weights": run(settings.weights, similarity),
            "similarity only": run(Factors(similarity=1.0), similarity),
            "without HyDE": run(settings.weights, similarity, hyde=False),
            "without feedback": run(settings.weights, similarity, feedback=False),
            "without query focus": run(settings.weights, similarity, focus=False),
            "without dormant traces": run(settings.weights, similarity, dormant=False),
        }
        for f in FACTORS:
            if f != "similarity":
                section[f"without {f}"] = run(Factors(**{**settings.weights.as_dict(), f: 0.0}), similarity)
    return out


def spacing() -> dict:
    """Stability after 10 recalls of one trace 1 s apart against 10 recalls a day apart (pure core: the fold that
    every reader of the log uses, `engram.memory.cognitive.book.TraceBook`), starting from a default encoding."""
    from engram.memory.cognitive.book import TraceBook
    from engram.memory.cognitive.encoding import encode
    from engram.config.agent import AgentConfig
    from engram.events.cognitive import TraceRetrieved
    from engram.events.envelope import Recorded

    def after(gap_s: float) -> dict:
        book = TraceBook("spacing")
        enc = encode(trace_id="t", content="Dancing helps Jon de-stress.", config=AgentConfig(), scope="discussion",
                     scope_id="d", source_type="user_statement")
        t0 = 1_700_000_000 * 1_000_000
        book.apply(Recorded(seq=1, stream="d", stream_version=1, agent="spacing", ts_us=t0, event=enc))
        for n in range(10):
            ts = t0 + int((n + 1) * gap_s * 1_000_000)
            book.apply(Recorded(seq=n + 2, stream="d", stream_version=n + 2, agent="spacing", ts_us=ts,
                                event=TraceRetrieved(query="how does Jon de-stress?", trace_ids=("t",))))
        t = book.traces["t"]
        return {"stability_h": round(t.stability_s / 3_600, 2), "review_interval_h": round(t.interval_s / 3_600, 2),
                "encoding_strength": round(t.encoding_strength, 3)}

    massed, spaced = after(1.0), after(86_400.0)
    return {"initial_stability_h": 1.0, "10 recalls 1 s apart": massed, "10 recalls a day apart": spaced,
            "stability ratio spaced/massed": round(spaced["stability_h"] / massed["stability_h"], 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(locomo.DEFAULT_PATH))
    ap.add_argument("--home", help="the benchmark's working directory (default: a fresh temporary directory)")
    ap.add_argument("--no-ablations", action="store_true")
    ap.add_argument("--runtime", choices=("ray", "inprocess"), default="ray",
                    help="where engram runs: local Ray (default, as served) or in this process without Ray (same code, same "
                         "figures; for a machine whose Ray is busy)")
    ap.add_argument("--order", choices=("forward", "reverse", "both"), default="forward",
                    help="the order the questions are asked in (hybrid run): the dataset's, reversed, or each in turn")
    args = ap.parse_args(argv)
    path = Path(args.path)
    data = locomo.load(path)
    items_by_conv = {s["sample_id"]: locomo.qa_items(s) for s in data}
    turns = raw_turns(path)

    from engram.providers.embeddings import make_embedder

    embedder = make_embedder()
    out = {
        "benchmark": "locomo-dev evidence recall",
        "data": str(path),
        "conversations": len(data),
        "turns": sum(len(r) for r in turns.values()),
        "items": sum(len(v) for v in items_by_conv.values()),
        "embedder": embedder.name,
        "runtime": args.runtime,
        "published_dragon_reference": locomo.PUBLISHED_DRAGON,
    }
    out["spacing"] = spacing()
    out.update(baselines(items_by_conv, turns, embedder))
    work = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="engram-bench-recall-"))
    ingested = work / "ingested"
    ingest_s, stats = ingest(path, ingested, args.runtime)
    best = max(out["bm25-raw-turns"]["recall@10"], out["dense-raw-turns"]["recall@10"])
    runs = {}
    orders = ("forward", "reverse") if args.order == "both" else (args.order,)
    hybrid_rows = []
    for similarity, order in [("hybrid", o) for o in orders] + [("embedding", orders[0])]:
        # Each run asks every question of a copy of the memory as ingest left it (the runs do not reinforce each other).
        home = work / f"{similarity}-{order}"
        shutil.copytree(ingested, home)
        rows: dict = {}
        report, info = run_engram(home, items_by_conv, turns, similarity, args.runtime, order, rows)
        key = f"engram-recall ({similarity} similarity{', default' if similarity == 'hybrid' else ''})"
        if order != orders[0]:
            key = f"engram-recall ({similarity} similarity, {order} order)"
        out[key] = {**report, **info, "order": order}
        if similarity == "hybrid":
            hybrid_rows.append(rows)
            out[key]["per_conversation"] = locomo.conversation_figures(rows)
        if order == orders[0]:
            runs[similarity] = key
            out[f"{key} recall@10 minus best baseline"] = round(report["recall@10"] - best, 1)
    out["leave-one-conversation-out (hybrid, default)"] = locomo.leave_one_out({"default": hybrid_rows})
    out["engram ingest"] = {"ingest_and_catch_up_s": round(ingest_s, 1), "traces": stats, **evidence_coverage(data, ingested)}
    if not args.no_ablations:
        out["ablations (state after ingest, pure core)"] = abl = ablations(ingested, items_by_conv, turns, embedder)
        # What the earlier questions' reinforcement changed: the run (questions in turn) minus the same weights on
        # the memory as ingest left it.
        out["recall@10 change from earlier questions' reinforcement"] = {
            similarity: round(out[key]["recall@10"] - abl[similarity]["default weights"]["recall@10"], 1)
            for similarity, key in runs.items()
        }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

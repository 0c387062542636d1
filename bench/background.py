"""The background processes on LoCoMo dev: Observer, Reflector, Consolidator (offline provider).

    .venv/bin/python bench/background.py [LOCOMO_JSON] [--home DIR] [--configs defaults,lowered,unbuffered]

Each LoCoMo dev conversation is ingested through engram on local Ray, the whole system running (every
policy group: discussion memory, auto-ingest and the other cognitive policies with the MiniLM embedder,
and the background processes), one session per append in the order of the conversation, each session's
turns at its date. Every conversation is ingested once per configuration, as its own agent:

- `defaults`: the guide's thresholds (Observer 30,000 tokens, buffering every 6,000; Reflector 40,000).
  A LoCoMo dev conversation has ~18,000 tokens: the Observer buffers increments but never activates, and
  the Reflector never runs. That is what the defaults do on conversations of this size.
- `lowered`: the thresholds scaled down by 10 (Observer 3,000, buffering every 750) and the Reflector
  at 1,000 tokens of notes (at 40,000/10 it would still not run: ~8x compression leaves ~2,200 note
  tokens per conversation), so that activations and reflections happen several times per conversation.
- `unbuffered`: `lowered` without buffering (bufferTokens 0): everything is observed at the threshold,
  for comparing what a threshold crossing costs.

Reported: observation compression (message tokens / note tokens), reflection compression (note tokens in /
trace tokens out), the consolidation runs (count, what they did) and their time per 1,000 traces (from the
runs' own measured durations, and a micro-benchmark of one run over 1,000 and 10,000 synthetic traces), the
lag between a message's append and its observation (recorded_at of the MessageAppended vs of the
ObservationsRecorded that observed it; and vs the activation that put its notes in the log), p50/p99, and
the work at each threshold crossing. Prints one JSON object.
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

DEFAULT_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
CONFIGS = {
    "defaults": {},
    "lowered": {"memory": {"observer": {"activationTokens": 3_000, "bufferTokens": 750},
                           "reflector": {"activationTokens": 1_000}}},
    "unbuffered": {"memory": {"observer": {"activationTokens": 3_000, "bufferTokens": 0},
                              "reflector": {"activationTokens": 1_000}}},
}


def agent_of(sample: str, config: str) -> str:
    return f"locomo-{sample}-{config}"


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 1) if values else None


def ingest(mem, path: Path, configs: list[str]) -> dict:
    from engram.memory.ingest.formats import parse_file
    from engram.memory.ingest.messages import discussion_write

    convs = parse_file(path, fmt="locomo", now_us=0)
    sessions = 0
    started = time.perf_counter()
    for config in configs:
        for conv in convs:
            agent = agent_of(conv.discussion, config)
            by_session: dict[str, list] = {}
            for m in conv.messages:
                by_session.setdefault(m.message_id.split(":")[0], []).append(m)
            mem.sync_settings(agent, ts_us=conv.messages[0].ts_us)
            first = 0
            for msgs in by_session.values():
                write = discussion_write(agent, f"{conv.discussion}-{config}", msgs, max_message_chars=100_000,
                                         first_index=first)
                first += len(msgs)
                mem.append([write])
                sessions += 1
    if not mem.wait_idle(timeout=3_600):
        raise RuntimeError("the background processes did not catch up within an hour")
    return {"conversations": len(convs), "sessions_appended": sessions, "seconds": round(time.perf_counter() - started, 1)}


def q(mem, sql: str, params=None) -> list[tuple]:
    return mem.sql(sql, params)[1]


def measure(mem, config: str) -> dict:
    like = f"locomo-%-{config}"
    ((messages, tokens),) = q(mem, "SELECT count(*), sum(token_estimate) FROM messages WHERE agent LIKE ? AND role <> 'system'", [like])
    ((increments, activations, reflections, obs_in, obs_out, refl_in, refl_out),) = q(mem, """
        SELECT (SELECT count(*) FROM ev_observations_recorded WHERE agent LIKE $1),
               (SELECT count(*) FROM ev_observations_activated WHERE agent LIKE $1),
               (SELECT count(*) FROM ev_reflected WHERE agent LIKE $1),
               (SELECT sum(input_tokens) FROM ev_observations_recorded WHERE agent LIKE $1),
               (SELECT sum(output_tokens) FROM ev_observations_recorded WHERE agent LIKE $1),
               (SELECT sum(input_tokens) FROM ev_reflected WHERE agent LIKE $1),
               (SELECT sum(output_tokens) FROM ev_reflected WHERE agent LIKE $1)""", [like])
    per_conv = q(mem, "SELECT scope_id, messages, message_tokens, note_tokens, round(observation_compression, 2), "
                      "active_notes, buffered_notes, reflected_notes FROM observation_logs WHERE agent LIKE ? ORDER BY agent", [like])
    # A message's lag: from its append to the ObservationsRecorded whose span covers it (and to the activation
    # that put those notes into the log, for buffered ones).
    observed = q(mem, """
        WITH obs AS (SELECT o.seq, o.stream, o.first_seq, o.last_seq, o.buffered, e.recorded_at
                     FROM ev_observations_recorded o JOIN events e ON e.seq = o.seq WHERE o.agent LIKE $1),
             act AS (SELECT a.stream, a.through_seq, e.recorded_at
                     FROM ev_observations_activated a JOIN events e ON e.seq = a.seq WHERE a.agent LIKE $1)
        SELECT epoch_ms(obs.recorded_at) - epoch_ms(m.recorded_at),
               CASE WHEN obs.buffered THEN (SELECT epoch_ms(min(act.recorded_at)) FROM act
                                            WHERE act.stream = obs.stream AND act.through_seq >= obs.last_seq)
                    ELSE epoch_ms(obs.recorded_at) END - epoch_ms(m.recorded_at)
        FROM events m JOIN obs ON obs.stream = m.stream AND m.seq BETWEEN obs.first_seq AND obs.last_seq
        WHERE m.type = 'MessageAppended' AND m.agent LIKE $1""", [like])
    observed_ms = [r[0] for r in observed]
    active_ms = [r[1] for r in observed if r[1] is not None]
    crossings = q(mem, """
        SELECT epoch_ms(ae.recorded_at) - epoch_ms(me.recorded_at)
        FROM ev_observations_activated a JOIN events ae ON ae.seq = a.seq JOIN events me ON me.seq = a.causation
        WHERE a.agent LIKE ?""", [like])
    unbuffered = q(mem, "SELECT count(*), sum(input_tokens) FROM ev_observations_recorded WHERE agent LIKE ? AND NOT buffered", [like])
    ((runs, busy, pruned, edges, schemas, conflicts, reinforced, run_ms, traces_seen),) = q(mem, """
        SELECT count(*), count(*) FILTER (WHERE pruned + edges + schemas + conflicts + reinforced > 0), sum(pruned),
               sum(edges), sum(schemas), sum(conflicts), sum(reinforced), sum(duration_ms), sum(traces)
        FROM ev_consolidation_ran WHERE agent LIKE ?""", [like])
    ((traces, active),) = q(mem, "SELECT count(*), count(*) FILTER (WHERE active) FROM memory_traces WHERE agent LIKE ?", [like])
    return {
        "messages": messages,
        "message_tokens": tokens,
        "observer": {
            "increments_recorded": increments,
            "activations": activations,
            "observed_at_the_threshold": {"recordings": unbuffered[0][0], "tokens": unbuffered[0][1] or 0},
            "compression": round(obs_in / obs_out, 2) if obs_out else None,
            "per_conversation": [
                {"conversation": c, "messages": m, "tokens": t, "note_tokens": n, "compression": r, "active_notes": a,
                 "buffered_notes": b, "reflected_notes": rn}
                for c, m, t, n, r, a, b, rn in per_conv
            ],
            "lag_to_observation_ms": {"p50": percentile(observed_ms, 50), "p99": percentile(observed_ms, 99),
                                      "messages": len(observed_ms), "unobserved_messages": messages - len(observed_ms)},
            "lag_to_activation_ms": {"p50": percentile(active_ms, 50), "p99": percentile(active_ms, 99),
                                     "messages": len(active_ms)},
            "crossing_message_to_activation_ms": {"p50": percentile([c for (c,) in crossings], 50),
                                                  "max": max((c for (c,) in crossings), default=None)},
        },
        "reflector": {
            "reflections": reflections,
            "note_tokens_in": refl_in or 0,
            "trace_tokens_out": refl_out or 0,
            "compression": round(refl_in / refl_out, 2) if refl_out else None,
        },
        "consolidation": {
            "runs": runs, "runs_that_changed_something": busy, "pruned": pruned, "edges": edges, "schemas": schemas,
            "conflicts_resolved": conflicts, "reviews": reinforced,
            "ms_per_1000_traces": round(run_ms / traces_seen * 1000, 2) if traces_seen else None,
            "mean_run_ms": round(run_ms / runs, 3) if runs else None,
        },
        "traces": {"total": traces, "active": active},
    }


def micro(sizes=(1_000, 10_000)) -> dict:
    """One consolidation run over N synthetic traces (no Ray, no I/O): entities, times, a few contradictions."""
    from engram.memory.background import consolidation
    from engram.memory.background.traces import TraceFold
    from engram.memory.cognitive.encoding import encode
    from engram.memory.cognitive.personality import Pad
    from engram.config.agent import AgentConfig
    from engram.events.cognitive import EdgeAdded
    from engram.events.envelope import Recorded
    from engram.providers.llm.factory import make_tasks

    tasks = make_tasks(None)
    rng = np.random.default_rng(7)
    out = {}
    hour = 3_600 * 1_000_000
    for n in sizes:
        fold = TraceFold("bench")
        now = 1_700_000_000 * 1_000_000 + 30 * 24 * hour
        names = [f"Person{i}" for i in range(200)]
        for i in range(n):
            ev = encode(trace_id=f"t{i}", content=f"memory {i} about {names[i % 200]}", config=AgentConfig(),
                        scope="discussion", scope_id=f"d{i % 10}", source_type="user_statement", source_seqs=(i,),
                        trace_type="episodic" if i % 3 else "semantic", importance=float(rng.uniform(0.2, 0.9)),
                        entities=(names[i % 200], names[(i * 7) % 200]))
            at = now - int(rng.uniform(0, 30 * 24)) * hour
            fold.apply(Recorded(seq=i, stream=f"d{i % 10}", stream_version=0, agent="bench", ts_us=at, event=ev))
        for i in range(0, n - 1, 50):
            fold.apply(Recorded(seq=n + i, stream="d0", stream_version=0, agent="bench", ts_us=now - hour,
                                event=EdgeAdded(src=f"t{i}", dst=f"t{i + 1}", kind="contradicts", weight=1.0)))
        vecs = rng.normal(size=(n, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        index = {f"t{i}": vecs[i] for i in range(n)}
        state = consolidation.ConsolidationState()
        started = time.perf_counter()
        result = consolidation.run("bench", fold, state, now_us=now, config=AgentConfig(), mood=Pad(),
                                   vectors=lambda ids, texts: np.stack([index[i] for i in ids]),
                                   summarize=tasks.summarize_schema)
        ms = (time.perf_counter() - started) * 1000
        out[str(n)] = {"run_ms": round(ms, 1), "ms_per_1000_traces": round(ms / n * 1000, 1), "pruned": result.pruned,
                       "edges": result.edges, "schemas": result.schemas, "conflicts": result.conflicts,
                       "reviews": result.reinforced, "bounded": result.bounded}
    return out


def compaction(path: Path) -> dict:
    """Infinite-context compaction per strategy on the same conversations (bench/compaction.py, summarised)."""
    from bench.compaction import STRATEGIES, WINDOW, conversations, run

    convs = conversations(path)
    out = {"context_window_tokens": WINDOW, "how": "the ContextCompactor's rules and compactor message by message "
           "(engram.memory.context.simulate); details per conversation: bench/compaction.py"}
    for strategy in STRATEGIES:
        r = run(convs, strategy, WINDOW)
        out[strategy] = {k: r[k] for k in ("chain_compression_ratio", "per_compaction_ratio", "context_ratio",
                                           "compactions", "merges", "max_level", "compaction_ms_p50")}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", nargs="?", default=str(DEFAULT_PATH))
    ap.add_argument("--home", help="engram home to use (default: a fresh temporary one)")
    ap.add_argument("--configs", default="defaults,lowered,unbuffered")
    args = ap.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="engram-bench-background-"))
    with open(args.path) as fh:
        samples = [s["sample_id"] for s in json.load(fh)]
    for config in configs:
        for sample in samples:
            folder = home / "agents" / agent_of(sample, config)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "agent.config.json").write_text(json.dumps(CONFIGS[config]))
    from engram.boot.embedded import Engram

    mem = Engram.open(home)
    try:
        run = ingest(mem, Path(args.path), configs)
        results = {c: measure(mem, c) for c in configs}
    finally:
        mem.close()
    report = {
        "benchmark": "background",
        "data": {"path": args.path, "conversations": samples},
        "provider": "offline (offline-heuristic-v1)",
        "ingest": run,
        "configs": {name: CONFIGS[name] or "the guide's defaults" for name in configs},
        "results": results,
        "consolidation_micro": micro(),
        "compaction": compaction(Path(args.path)),
        "notes": [
            "defaults: every LoCoMo dev conversation stays below the Observer's 30,000 tokens; increments are buffered, "
            "none is activated, and the Reflector never runs",
            "lag: sessions are appended one after another as fast as engram takes them, so a message waits for the "
            "tokens that complete its increment (bufferTokens) to arrive, then for the Observer's turn",
            "consolidation: one run per hour of each agent's event time (the conversations span months)",
        ],
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

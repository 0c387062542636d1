"""A home with a known memory, made without Ray: events appended to a real log and folded by the real
projections (`engram.shard.host.ShardHost`), with the hashing embedder (what is tested here is not the embedder).

`small_home` holds one of everything the views show, at known times; `large_home` holds `traces` traces
with edges between neighbours, one schema cluster per 50 traces and retrievals of neighbours and schemas
(the benchmark's 10,000-trace agent).
"""

from __future__ import annotations

from pathlib import Path

from engram.events.background import ConsolidationRan, Reflected
from engram.events.cognitive import EdgeAdded, MoodChanged, TraceEncoded, TracePruned, TraceReinforced, TraceRetrieved
from engram.events.discussion import ChunkSummarized, MemoryFileCreated
from engram.events.envelope import NewEvent, Write
from engram.events.messages import MessageAppended
from engram.events.provenance import LlmCall
from engram.providers.embeddings.hashing import HashingEmbedder
from engram.shard.host import ShardHost

AGENT = "inspected"
DISCUSSION = "d1"
T0 = 1_700_000_000_000_000  # µs
MINUTE = 60_000_000
HOUR = 60 * MINUTE
LLM = LlmCall(provider="offline", model="offline-heuristic-v1", task="summarize_chunk", prompt_hash="abc", input_tokens=50,
              output_tokens=10)


def _trace(tid: str, content: str, seqs: tuple[int, ...], **kw) -> TraceEncoded:
    fields = dict(trace_id=tid, content=content, trace_type="episodic", scope="discussion", scope_id=DISCUSSION,
                  source_type="user_statement", source_seqs=seqs, importance=0.5, confidence=0.8, strength=0.5,
                  stability_s=3_600.0, interval_s=3_600.0)
    fields.update(kw)
    return TraceEncoded(**fields)


def _host(root: Path) -> ShardHost:
    return ShardHost(root / "log" / "shard-000.duckdb", root / "projections", services={"embedder": HashingEmbedder()})


def _append(host: ShardHost, stream: str, events: list[tuple[int, object]], agent: str = AGENT) -> list[int]:
    result = host.append_many([Write(stream=stream, agent=agent, events=tuple(NewEvent(e, ts) for ts, e in events))])[0]
    return list(result.seqs)


def small_home(root: Path) -> Path:
    """12 messages, 2 chunk memories, 6 traces (one retrieved twice and reviewed once, one pruned, two in a schema
    cluster with its schema trace), edges of three kinds, a reflection, a mood change, two consolidation runs."""
    host = _host(root)
    try:
        msgs = [(T0 + i * MINUTE, MessageAppended(role="user" if i % 2 else "assistant", content=f"message {i} about Lisbon",
                                                   message_id=f"m{i}", token_estimate=5)) for i in range(1, 13)]
        seqs = _append(host, DISCUSSION, msgs)
        _append(host, DISCUSSION, [
            (T0 + 3 * MINUTE, MemoryFileCreated(generation=0, store="memories", message_count=3)),
            (T0 + 6 * MINUTE, ChunkSummarized(generation=0, first_seq=seqs[0], last_seq=seqs[4], message_ids=tuple(f"m{i}" for i in range(1, 6)),
                                              token_count=25, summary="first chunk", llm=LLM, memory_id=f"g0-m{seqs[0]}-{seqs[4]}")),
            (T0 + 11 * MINUTE, ChunkSummarized(generation=0, first_seq=seqs[5], last_seq=seqs[9], message_ids=tuple(f"m{i}" for i in range(6, 11)),
                                               token_count=25, summary="second chunk", llm=LLM, memory_id=f"g0-m{seqs[5]}-{seqs[9]}")),
            (T0 + 12 * MINUTE, _trace("t1", "Priya flies to Lisbon", (seqs[0],))),
            (T0 + 12 * MINUTE, _trace("t2", "the budget is 2000 euros", (seqs[1],))),
            (T0 + 12 * MINUTE, _trace("t3", "Sintra on Tuesday", (seqs[2],))),
            (T0 + 12 * MINUTE, _trace("t4", "Sintra palace tickets", (seqs[3],))),
            (T0 + 12 * MINUTE, _trace("t5", "a passing remark", (seqs[4],), strength=0.2)),
            (T0 + 13 * MINUTE, _trace("s1", "trips to Sintra", (seqs[2], seqs[3]), trace_type="semantic", source_type="schema",
                                      category="schema")),
            (T0 + 13 * MINUTE, EdgeAdded(src="t1", dst="t2", kind="shared_entity", weight=0.5)),
            (T0 + 13 * MINUTE, EdgeAdded(src="t2", dst="t3", kind="temporal_sequence", weight=0.4)),
            (T0 + 13 * MINUTE, EdgeAdded(src="t3", dst="s1", kind="schema_instance", weight=0.6)),
            (T0 + 13 * MINUTE, EdgeAdded(src="t4", dst="s1", kind="schema_instance", weight=0.6)),
            (T0 + 2 * HOUR, TraceRetrieved(query="where to?", trace_ids=("t1",), scores=(0.9,), discussion=DISCUSSION)),
            (T0 + 10 * HOUR, TraceReinforced(trace_id="t1", reason="spaced repetition")),
            (T0 + 30 * HOUR, TraceRetrieved(query="Lisbon?", trace_ids=("t1",), scores=(0.8,), discussion=DISCUSSION)),
            (T0 + 40 * HOUR, TracePruned(trace_id="t5", strength=0.01)),
            (T0 + 41 * HOUR, Reflected(consumed_note_ids=(), trace_ids=(), superseded=(), input_tokens=0, output_tokens=0,
                                       llm=LLM)),
        ])
        _append(host, f"agent:{AGENT}", [
            (T0 + 20 * HOUR, MoodChanged(valence=0.5, arousal=0.1, dominance=0.0, reason="good news")),
            (T0 + 21 * HOUR, ConsolidationRan(interval_s=3600, traces=6, pruned=0, edges=1, schemas=0, conflicts=0,
                                              reinforced=0, max_traces=500)),
            (T0 + 22 * HOUR, ConsolidationRan(interval_s=3600, traces=6, pruned=0, edges=0, schemas=0, conflicts=0,
                                              reinforced=0, max_traces=500)),
            (T0 + 48 * HOUR, MoodChanged(valence=0.0, arousal=0.0, dominance=0.0, reason="calm")),
        ])
        host.wait_projections(host.head())
    finally:
        host.close()
    return root


def large_home(root: Path, traces: int, messages: int = 2_000) -> Path:
    """`traces` traces over `messages` messages, a temporal edge between consecutive traces, a shared-entity
    edge every third, a schema trace per 50 traces linked from five of them; every tenth trace retrieved with
    its two predecessors, and every schema trace retrieved."""
    host = _host(root)
    try:
        seqs: list[int] = []
        for start in range(0, messages, 5_000):
            batch = [(T0 + i * MINUTE, MessageAppended(role="user" if i % 2 else "assistant", content=f"message {i} of a long talk",
                                                        message_id=f"m{i}", token_estimate=6))
                     for i in range(start, min(messages, start + 5_000))]
            seqs += _append(host, DISCUSSION, batch)
        events: list[tuple[int, object]] = []
        for i in range(traces):
            ts = T0 + i * MINUTE
            # Strength by runs of 50 traces, so the strongest ones are neighbours (edges and clusters among them).
            events.append((ts, _trace(f"t{i}", f"fact number {i} about topic {i % 97}", (seqs[i % len(seqs)],),
                                      strength=0.3 + ((i // 50) % 7) / 10)))
            if i:
                events.append((ts, EdgeAdded(src=f"t{i - 1}", dst=f"t{i}", kind="temporal_sequence", weight=0.3)))
            if i >= 3 and i % 3 == 0:
                events.append((ts, EdgeAdded(src=f"t{i - 3}", dst=f"t{i}", kind="shared_entity", weight=0.4)))
            if i % 50 == 49:
                sid = f"s{i // 50}"
                events.append((ts, _trace(sid, f"schema {i // 50}", (seqs[i % len(seqs)],), trace_type="semantic",
                                          source_type="schema", category="schema")))
                events += [(ts, EdgeAdded(src=f"t{j}", dst=sid, kind="schema_instance", weight=0.6)) for j in range(i - 49, i + 1, 10)]
                events.append((ts + HOUR, TraceRetrieved(query=f"schema {i // 50}", trace_ids=(sid,), scores=(0.7,),
                                                          discussion=DISCUSSION)))
            if i % 10 == 0 and i >= 2:  # three neighbours at once: the strongest traces are linked
                events.append((ts + HOUR, TraceRetrieved(query=f"topic {i % 97}", trace_ids=(f"t{i - 2}", f"t{i - 1}", f"t{i}"),
                                                          scores=(0.7, 0.6, 0.5), discussion=DISCUSSION)))
        events.sort(key=lambda e: e[0])
        for start in range(0, len(events), 10_000):
            _append(host, DISCUSSION, events[start:start + 10_000])
        host.wait_projections(host.head())
    finally:
        host.close()
    return root

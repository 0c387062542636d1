"""Small builders for the cognitive tests: traces, recorded events, unit vectors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engram.config import defaults as d
from engram.events.envelope import Recorded
from engram.memory.cognitive.model import MemoryTrace

HOUR_US = 3_600 * 1_000_000
T0 = 1_700_000_000 * 1_000_000  # an event time


def trace(tid: str = "t1", *, s0: float = 0.5, stability_s: float = d.INITIAL_STABILITY_S, at: int = T0, **kw) -> MemoryTrace:
    fields = dict(
        trace_id=tid, agent="a", stream="d", content=f"content of {tid}", trace_type="episodic", scope="discussion",
        scope_id="d", source_type="user_statement", source_seqs=(1,), source_message_ids=("m1",), confidence=0.8,
        valence=0.0, arousal=0.0, dominance=0.0, intensity=0.0, flashbulb=False, importance=0.5,
        encoding_strength=s0, stability_s=stability_s, encoded_us=at, last_access_us=at,
        interval_s=d.INITIAL_REINFORCEMENT_INTERVAL_S, next_due_us=at + HOUR_US,
    )
    fields.update(kw)
    return MemoryTrace(**fields)


def rec(event, *, seq: int = 1, ts_us: int = T0, stream: str = "d", agent: str = "a", causation: int | None = None) -> Recorded:
    return Recorded(seq=seq, stream=stream, stream_version=seq, agent=agent, ts_us=ts_us, event=event, causation=causation)


def unit(*values: float, dim: int = 8) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[: len(values)] = values
    return v / np.linalg.norm(v)


def memory_of(texts: dict[str, str], embedder):
    """An agent's memory of episodic traces (trace id -> content), one per message `D1:<n>`, embedded by `embedder`."""
    from engram.memory.cognitive.memory import AgentMemory
    from engram.events.cognitive import TraceEncoded

    mem = AgentMemory("a", embedder.dim)
    mem.apply_batch([rec(TraceEncoded(trace_id=tid, content=text, trace_type="episodic", scope="discussion", scope_id="d",
                                      source_type="user_statement", source_seqs=(seq,), importance=0.5, confidence=0.8,
                                      strength=0.5, stability_s=3600.0, interval_s=3600.0,
                                      source_message_ids=(f"D1:{seq}",)), seq=seq)
                     for seq, (tid, text) in enumerate(texts.items(), 1)], embedder.embed)
    return mem


@dataclass
class Held:
    """A memory made of a book and an index built apart (what recall reads: `retrieval.RecallMemory`)."""

    book: Any
    index: Any
    lexical: Any = None
    dormant_index: Any = None
    dormant_lexical: Any = None
    answers_of: Any = None


def reader_query(mem, embedder, query: str):
    """What the trace reader asks with: the agent's default recall settings, the focused query, the offline
    heuristic's hypothetical memory, and their two embeddings -> (settings, focus, hypothesis, q, h)."""
    from engram.memory.cognitive.retrieval import RecallSettings
    from engram.config.agent import AgentConfig
    from engram.providers.llm.factory import make_tasks

    settings = RecallSettings.of(AgentConfig())
    focus = mem.lexical.focus(query, settings.focus_common_share)
    hypothesis = make_tasks().hyde(query).value or query
    q, h = embedder.embed([focus, hypothesis])
    return settings, focus, hypothesis, q, h

"""The Reflector's decisions: when to reflect, and what a reflection records.

An observation log is reflected when its active notes hold more than `activationTokens` (40,000)
tokens. The `reflect` memory task merges related notes into trace candidates and flags
contradictions; this module turns its answer into events:

- `Reflected`: every note given to the task is consumed (it stays in the log, marked), with the
  traces made and what lost a contradiction;
- a candidate that restates an active trace naming the same entities (e.g. auto-ingest's fact of the
  same message) makes no second copy: `Reflected.duplicates` verifies that trace instead;
- one `TraceEncoded` per other candidate through the cognitive layer's `encode` (provenance: source type
  "observation" for a single note, "reflection" for merged ones; the notes' message seqs and ids),
  linked to the discussion's previous trace and to recent traces naming its entities;
- per contradiction, resolved again by personality (`engram.memory.background.conflicts`): `EdgeAdded`
  (contradicts, newer -> older), and `EdgeAdded(supersedes)` + `ConflictResolved` (the loser is
  soft-deleted) or, when both are kept, `ConflictResolved(keep_both)` recording the discrepancy.
"""

from __future__ import annotations

import math
from typing import Sequence

import msgspec

from engram.config import defaults as d
from engram.config.agent import AgentConfig
from engram.events.background import ObservationNote, Reflected
from engram.events.base import Event
from engram.events.cognitive import ConflictResolved, EdgeAdded
from engram.events.envelope import Recorded
from engram.events.provenance import LlmCall
from engram.kernel.tokens import estimate_tokens
from engram.memory.background.conflicts import Side, resolve
from engram.memory.background.observation_log import note_tokens
from engram.memory.background.traces import TraceFold, words_of
from engram.memory.cognitive import linking, llm_bridge
from engram.memory.cognitive.encoding import Emotion, encode, trace_id
from engram.memory.cognitive.memory import entity_key
from engram.memory.cognitive.model import MemoryTrace
from engram.memory.cognitive.personality import Pad
from engram.providers.llm.types import Reflection, TraceBrief

# Trace category by the observation type of a trace's most important note: what personality attends to
# when it is encoded (conscientiousness -> action items, agreeableness -> preferences, ...).
CATEGORY_OF_NOTE = {
    "factual": "knowledge",
    "emotional": "emotional_context",
    "commitment": "action_item",
    "preference": "user_preference",
    "creative": "episodic",
    "correction": "correction",
}


def due(active_tokens: int, threshold: int) -> bool:
    """The Reflector runs when the active notes exceed its threshold (40,000 tokens by default)."""
    return active_tokens > threshold


def existing_briefs(fold: TraceFold, notes: Sequence[ObservationNote], limit: int = d.REFLECTOR_EXISTING_TRACES) -> list[TraceBrief]:
    """The agent's active traces most likely to be about what the notes say: those sharing the notes' rarer
    entities (each shared entity counts by its inverse trace frequency, so the speaker's own name, found
    everywhere, counts for little), most recent first among equals. What the notes may contradict."""
    wanted = {entity_key(e) for n in notes for e in n.entities}
    if not wanted:
        return []
    active = fold.book.active()
    holders: dict[str, list[MemoryTrace]] = {}
    for t in active:
        for e in {entity_key(x) for x in t.entities} & wanted:
            holders.setdefault(e, []).append(t)
    scores: dict[str, float] = {}
    for e, traces in holders.items():
        idf = math.log(1 + len(active) / len(traces))
        for t in traces:
            scores[t.trace_id] = scores.get(t.trace_id, 0.0) + idf
    best = sorted(scores, key=lambda tid: (-round(scores[tid], 9), -fold.book.traces[tid].encoded_us, tid))[:limit]
    out = []
    for tid in best:
        t = fold.book.traces[tid]
        out.append(TraceBrief(trace_id=tid, content=t.content, ts_us=t.encoded_us, confidence=t.confidence,
                              entities=tuple(t.entities)))
    return out


def restated(fold: TraceFold, content: str, entities: Sequence[str]) -> str | None:
    """The active trace that says what `content` says: one with the same words (as BM25 tokenises them),
    else one of the recent traces naming one of `entities` whose words overlap at REFLECTION_RESTATES_OVERLAP
    or more; None if none does."""
    words = words_of(content)
    if not words:
        return None
    same = fold.by_words.get(words)
    if same is not None and fold.book.traces[same].active:
        return same
    for tid in fold.recent_with_entities(entities):
        other = words_of(fold.book.traces[tid].content)
        if len(words & other) / len(words | other) >= d.REFLECTION_RESTATES_OVERLAP:
            return tid
    return None


def _message_ids(notes: Sequence[ObservationNote]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    pairs: dict[int, str] = {}
    for n in notes:
        ids = n.source_message_ids if len(n.source_message_ids) == len(n.source_seqs) else ("",) * len(n.source_seqs)
        for seq, mid in zip(n.source_seqs, ids):
            pairs.setdefault(seq, mid)
    seqs = tuple(sorted(pairs))
    return seqs, tuple(pairs[s] for s in seqs if pairs[s])


def _local(stream: str, agent: str, ts_us: int, event: Event) -> Recorded:
    return Recorded(seq=0, stream=stream, stream_version=0, agent=agent, ts_us=ts_us, event=event)


def reflection_events(
    *,
    agent: str,
    scope: str,
    scope_id: str,
    stream: str,
    notes: Sequence[ObservationNote],
    reflection: Reflection,
    llm: LlmCall,
    fold: TraceFold,
    config: AgentConfig,
    mood: Pad,
    ts_us: int,
    threshold: int,
    reflection_id: str,
) -> list[tuple[str, Event]]:
    """The events of one reflection, each with its deterministic event id, in the order to append.

    New traces are folded into `fold` as they are decided (so the next one links to them).
    """
    by_id = {n.note_id: n for n in notes}
    trace_of: dict[str, str] = {}  # note id -> the trace that condenses it
    traces: list[tuple[str, Event]] = []
    trace_ids: list[str] = []
    trace_notes: list[tuple[str, ...]] = []
    duplicates: list[str] = []
    duplicate_notes: list[tuple[str, ...]] = []
    out_tokens = 0
    for c in reflection.traces:
        members = [by_id[nid] for nid in dict.fromkeys(c.source_note_ids) if nid in by_id]
        if not members or not c.content.strip():
            continue
        ids = tuple(sorted(n.note_id for n in members))
        tid = trace_id(agent, "reflection", *ids)
        if tid in fold.book.traces:
            continue  # the same notes were condensed before (a re-run)
        entities = tuple(dict.fromkeys(c.entities or [e for n in members for e in n.entities]))
        same = restated(fold, c.content, entities)
        if same is not None:  # already remembered: verify it, and let the notes stand for it
            duplicates.append(same)
            duplicate_notes.append(ids)
            for n in members:
                trace_of[n.note_id] = same
            continue
        seqs, message_ids = _message_ids(members)
        lead = max(members, key=lambda n: (n.importance, -n.observed_us, n.note_id))
        lexicon = llm_bridge.emotion(c.content)
        pad = (c.valence, c.arousal, c.dominance)
        emotion = Emotion(*pad, lexicon.intensity) if any(pad) else lexicon
        episodic = c.trace_type == "episodic"
        trace = encode(
            trace_id=tid,
            content=c.content,
            config=config,
            mood=mood,
            scope="discussion" if episodic else "agent",
            scope_id=stream if episodic else agent,
            source_type="reflection" if len(members) > 1 else "observation",
            source_seqs=seqs,
            source_message_ids=message_ids,
            trace_type=c.trace_type,
            category=CATEGORY_OF_NOTE.get(lead.type, "knowledge"),
            importance=c.importance,
            confidence=c.confidence,
            entities=entities,
            tags=tuple(dict.fromkeys((*c.tags, "reflection"))),
            emotion=emotion,
        )
        trace = msgspec.structs.replace(trace, links=linking.edges_for(
            tid,
            encoded_us=ts_us,
            previous=fold.last_in_stream.get(stream),
            similar=[],
            sharing_entities=fold.recent_with_entities(entities, exclude=tid),
        ))
        fold.apply(_local(stream, agent, ts_us, trace))
        traces.append((f"trace:{tid}", trace))
        trace_ids.append(tid)
        trace_notes.append(ids)
        out_tokens += estimate_tokens(c.content)
        for n in members:
            trace_of[n.note_id] = tid

    conflicts, superseded = _conflicts(reflection, by_id, trace_of, fold, config, stream, agent, ts_us)
    reflected = Reflected(
        consumed_note_ids=tuple(n.note_id for n in notes),
        trace_ids=tuple(trace_ids),
        superseded=tuple(superseded),
        input_tokens=sum(note_tokens(n) for n in notes),
        output_tokens=out_tokens,
        llm=llm,
        scope=scope,
        scope_id=scope_id,
        threshold=threshold,
        conflicts=sum(1 for _, e in conflicts if isinstance(e, ConflictResolved)),
        trace_note_ids=tuple(trace_notes),
        duplicates=tuple(duplicates),
        duplicate_note_ids=tuple(duplicate_notes),
    )
    return [(f"reflected:{reflection_id}", reflected)] + traces + conflicts


def _conflicts(
    reflection: Reflection, by_id: dict[str, ObservationNote], trace_of: dict[str, str], fold: TraceFold, config: AgentConfig,
    stream: str, agent: str, ts_us: int,
) -> tuple[list[tuple[str, Event]], list[str]]:
    out: list[tuple[str, Event]] = []
    superseded: dict[str, None] = {}
    seen: set[tuple[str, str]] = set()

    def side(item: str) -> tuple[Side, str | None] | None:
        if item in by_id:
            n = by_id[item]
            return Side(item, n.observed_us, n.confidence), trace_of.get(item)
        t = fold.book.traces.get(item)
        if t is not None and t.active:
            return Side(item, t.encoded_us, t.confidence), item
        return None

    for c in reflection.contradictions:
        a, b = side(c.older), side(c.newer)
        if a is None or b is None or c.older == c.newer:
            continue
        res = resolve(config.personality, a[0], b[0])
        older, newer = sorted((a, b), key=lambda s: (s[0].ts_us, s[0].id))
        traced = {a[0].id: a[1], b[0].id: b[1]}
        old_t, new_t = older[1], newer[1]
        if res.loser is not None and traced[res.loser] is None:
            superseded[res.loser] = None  # a note the reflection did not keep: it stays in the log, marked
            continue
        if old_t is None or new_t is None or old_t == new_t:
            continue  # merged into one trace (tagged disputed by the task), or a side without a trace
        pair = (min(old_t, new_t), max(old_t, new_t))
        if pair in seen:
            continue
        seen.add(pair)
        decided = conflict_events(new_t, old_t, res.how, traced.get(res.winner), traced.get(res.loser) if res.loser else None,
                                  c.reason)
        if res.loser is not None:
            superseded[res.loser] = None
        for _, e in decided:
            fold.apply(_local(stream, agent, ts_us, e))
        out += decided
    return out, list(superseded)


def conflict_events(newer: str, older: str, how: str, winner: str | None, loser: str | None, reason: str) -> list[tuple[str, Event]]:
    """A resolved contradiction between traces: `contradicts` (newer -> older), then either `supersedes`
    (winner -> loser) and `ConflictResolved` (the loser is soft-deleted), or `ConflictResolved(keep_both)`."""
    out: list[tuple[str, Event]] = [
        (f"edge:{newer}:{older}:contradicts",
         EdgeAdded(src=newer, dst=older, kind="contradicts", weight=d.CONTRADICTION_EDGE_WEIGHT)),
    ]
    if loser is None or winner is None:
        resolved = ConflictResolved(winner=newer, loser=older, resolution=how, note=f"both kept, discrepancy: {reason}")
    else:
        out.append((f"edge:{winner}:{loser}:supersedes",
                    EdgeAdded(src=winner, dst=loser, kind="supersedes", weight=d.SUPERSEDES_EDGE_WEIGHT)))
        resolved = ConflictResolved(winner=winner, loser=loser, resolution=how, note=reason)
    out.append((f"conflict:{resolved.winner}:{resolved.loser}:{how}", resolved))
    return out

"""Answers of the cognitive-memory tasks: Observer notes, Reflector traces, auto-ingest facts."""

from __future__ import annotations

import msgspec

from engram.events.background import ObservationNote
from engram.events.envelope import iso
from engram.providers.llm import inputs as i
from engram.providers.llm.answers.common import (
    AnswerInvalid,
    ISO_DATE,
    MODEL_CONFIDENCE,
    as_json,
    clamp,
    convert,
    items,
)
from engram.providers.llm.focus import ingest_focus_text, ingest_policy, observer_focus_text, resolve
from engram.providers.llm.hashing import note_id
from engram.providers.llm.prompts import EMPTY, numbered_transcript, wilmer_values
from engram.providers.llm.types import (
    Contradiction,
    FACT_CATEGORIES,
    Fact,
    OBSERVATION_TYPES,
    Reflection,
    TRACE_TYPES,
    TraceCandidate,
)

# ---------------------------------------------------------------- observer


class _NoteAnswer(msgspec.Struct):
    type: str
    text: str
    importance: float = 0.5
    entities: list[str] = []
    refers_to: str | None = None
    details: list[str] = []
    lines: list[int] = []


def observe_values(t: i.Observe) -> dict[str, str]:
    v = wilmer_values(numbered_transcript(t.lines))
    v["Focus"] = observer_focus_text(t.traits)
    return v


def decode_notes(t: i.Observe, answer: str) -> tuple[ObservationNote, ...]:
    raw = items(as_json(answer), "notes")
    notes = convert(raw, list[_NoteAnswer], "notes")
    out = []
    for n in notes:
        kind = n.type.strip().lower()
        if kind not in OBSERVATION_TYPES:
            raise AnswerInvalid(f"note type {n.type!r} is not one of {list(OBSERVATION_TYPES)}")
        text = n.text.strip()
        if not text:
            continue
        picked = [t.lines[k - 1] for k in dict.fromkeys(n.lines) if 1 <= k <= len(t.lines)] or list(t.lines)
        seqs = tuple(line.seq for line in picked)
        refers = n.refers_to.strip() if n.refers_to else None
        out.append(
            ObservationNote(
                note_id=note_id(seqs, kind, text),
                type=kind,
                text=text,
                importance=clamp(n.importance),
                observed_us=max(line.ts_us for line in picked),
                entities=tuple(dict.fromkeys(e.strip() for e in n.entities if e.strip())),
                refers_to=refers if refers and ISO_DATE.match(refers) else None,
                details=tuple(d.strip() for d in n.details if d.strip()),
                source_seqs=seqs,
                confidence=MODEL_CONFIDENCE,
            )
        )
    return tuple(out)


# ---------------------------------------------------------------- reflector


class _TraceAnswer(msgspec.Struct):
    content: str
    trace_type: str = "semantic"
    importance: float = 0.5
    confidence: float = MODEL_CONFIDENCE
    note_ids: list[str] = []
    entities: list[str] = []
    tags: list[str] = []


class _ContradictionAnswer(msgspec.Struct):
    older: str
    newer: str
    reason: str = ""


class _ReflectAnswer(msgspec.Struct):
    traces: list[_TraceAnswer] = []
    contradictions: list[_ContradictionAnswer] = []


def reflect_values(t: i.Reflect) -> dict[str, str]:
    notes = "\n".join(
        f"{n.note_id} ({iso(n.observed_us)[:10]}, {n.type}, {n.importance:.2f}): {n.text}" for n in t.notes
    )
    traces = "\n".join(f"{x.trace_id}: {x.content}" for x in t.existing)
    return {"Notes": notes or EMPTY, "ExistingTraces": traces or EMPTY}


def decode_reflection(t: i.Reflect, answer: str) -> Reflection:
    data = as_json(answer)
    if not isinstance(data, dict):
        raise AnswerInvalid('expected an object with "traces" and "contradictions"')
    a = convert(data, _ReflectAnswer, "reflection")
    notes = {n.note_id: n for n in t.notes}
    confidence = {n.note_id: n.confidence for n in t.notes} | {x.trace_id: x.confidence for x in t.existing}
    contradictions: list[Contradiction] = []
    superseded: dict[str, None] = {}  # the losers, in order
    for c in a.contradictions:
        if c.older not in confidence or c.newer not in confidence or c.older == c.newer:
            continue  # an id the model made up
        how, winner, loser = resolve(t.traits, c.older, c.newer, confidence[c.older], confidence[c.newer])
        contradictions.append(
            Contradiction(older=c.older, newer=c.newer, reason=c.reason.strip(), resolution=how, winner=winner, loser=loser)
        )
        if loser is not None:
            superseded[loser] = None
    traces = []
    for x in a.traces:
        kind = x.trace_type.strip().lower()
        if kind not in TRACE_TYPES:
            raise AnswerInvalid(f"trace_type {x.trace_type!r} is not one of {list(TRACE_TYPES)}")
        members = [notes[n] for n in dict.fromkeys(x.note_ids) if n in notes and n not in superseded]
        if not x.content.strip() or not members:
            continue
        traces.append(
            TraceCandidate(
                content=x.content.strip(),
                trace_type=kind,
                importance=clamp(x.importance),
                confidence=clamp(x.confidence),
                source_note_ids=tuple(n.note_id for n in members),
                source_seqs=tuple(sorted({s for n in members for s in n.source_seqs})),
                entities=tuple(dict.fromkeys(e.strip() for e in x.entities if e.strip())),
                tags=tuple(dict.fromkeys(g.strip() for g in x.tags if g.strip())),
            )
        )
    return Reflection(
        traces=tuple(traces),
        contradictions=tuple(contradictions),
        consumed_note_ids=tuple(notes),
        superseded=tuple(superseded),
    )


# ---------------------------------------------------------------- auto-ingest


class _FactAnswer(msgspec.Struct):
    category: str
    content: str
    importance: float = 0.5
    entities: list[str] = []
    line: int = 1


def facts_values(t: i.ExtractFacts) -> dict[str, str]:
    v = wilmer_values(numbered_transcript(t.lines))
    v["Categories"] = ingest_focus_text(ingest_policy(t.traits))
    v["MaxFacts"] = str(t.max_per_turn)
    return v


def decode_facts(t: i.ExtractFacts, answer: str) -> tuple[Fact, ...]:
    raw = items(as_json(answer), "facts")
    facts = convert(raw, list[_FactAnswer], "facts")
    allowed = ingest_policy(t.traits).categories
    out = []
    for order, f in enumerate(facts):
        category = f.category.strip().lower()
        if category not in FACT_CATEGORIES:
            raise AnswerInvalid(f"fact category {f.category!r} is not one of {list(FACT_CATEGORIES)}")
        if category not in allowed or not f.content.strip() or not t.lines:
            continue  # this personality does not store that category
        line = t.lines[f.line - 1] if 1 <= f.line <= len(t.lines) else t.lines[0]
        fact = Fact(
            category=category,
            content=f.content.strip(),
            importance=clamp(f.importance),
            source_seq=line.seq,
            entities=tuple(dict.fromkeys(e.strip() for e in f.entities if e.strip())),
            message_id=line.message_id,
        )
        if fact.importance >= t.importance_threshold:
            out.append((fact.importance, order, fact))
    out.sort(key=lambda x: (-x[0], x[1]))
    return tuple(f for _, _, f in out[: t.max_per_turn])



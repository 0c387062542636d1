"""Per task: what fills the prompt's placeholders, and how a model's answer becomes the task's value.

An answer that is not what the task asked for raises `AnswerInvalid` with a message the repair
prompt shows the model; the caller retries once, then records a failure.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import msgspec

from engram.events.background import ObservationNote
from engram.llm import inputs as i
from engram.llm.focus import ingest_focus_text, ingest_policy, observer_focus_text, resolve
from engram.llm.hashing import note_id
from engram.llm.jsonparse import AnswerNotJson, parse_json
from engram.llm.offline.analysis import text_units
from engram.llm.offline.summarize import summary_text
from engram.llm.prompts import EMPTY, line_label, numbered_transcript, transcript, wilmer_values
from engram.llm.types import (
    FACT_CATEGORIES,
    OBSERVATION_TYPES,
    TRACE_TYPES,
    Compaction,
    Contradiction,
    Fact,
    Reflection,
    StructuredMemory,
    TraceCandidate,
)
from engram.events.envelope import iso
from engram.tokens import estimate_tokens

# Confidence of a model's note or trace when it states none (ObservationNote's own default).
MODEL_CONFIDENCE = 0.7
SENTIMENTS = ("positive", "negative", "neutral", "mixed")
_ISO_DATE = re.compile(r"^\d{4}(?:-\d{2}(?:-\d{2})?)?$")


class AnswerInvalid(ValueError):
    """The answer is not the value the task asked for."""


class TaskSpec(msgspec.Struct, frozen=True):
    task: str
    expects_json: bool
    values: Callable[[Any], dict[str, str]]
    decode: Callable[[Any, str], object]
    # The response size the input itself asks for (WilmerAI maxResponseSizeInTokens), if any.
    response_tokens: Callable[[Any], int | None] = lambda _: None


def _json(answer: str) -> Any:
    try:
        return parse_json(answer)
    except AnswerNotJson as exc:
        raise AnswerInvalid(str(exc)) from None


def _convert(data: Any, typ: type, what: str) -> Any:
    try:
        return msgspec.convert(data, typ, strict=False)
    except msgspec.ValidationError as exc:
        raise AnswerInvalid(f"{what}: {exc}") from None


def _items(data: Any, key: str) -> list:
    """The list under `key` (or the answer itself when the model sent a bare array)."""
    if isinstance(data, dict) and isinstance(data.get(key), list):
        return data[key]
    if isinstance(data, list):
        return data
    raise AnswerInvalid(f'expected an object with a "{key}" array')


def _clamp(x: float) -> float:
    return round(min(1.0, max(0.0, float(x))), 3)


def _text(answer: str) -> str:
    text = answer.strip()
    if not text:
        raise AnswerInvalid("the answer is empty")
    return text


# ---------------------------------------------------------------- text tasks


def _summarize_chunk_values(t: i.SummarizeChunk) -> dict[str, str]:
    v = wilmer_values(transcript(t.lines), t.recent_memories, t.all_memories, t.chat_summary)
    v["MaxTokens"] = str(t.max_tokens)
    return v


def _merge_values(t: i.MergeSummary) -> dict[str, str]:
    v = wilmer_values("\n".join(t.new_memories), t.new_memories, t.all_memories, t.previous_summary, t.new_memories)
    v["MaxTokens"] = str(t.max_tokens)
    return v


def _schema_values(t: i.SummarizeSchema) -> dict[str, str]:
    return {"Members": "\n".join(f"- {m}" for m in t.members) or EMPTY, "MaxTokens": str(t.max_tokens)}


def _hyde_values(t: i.Hyde) -> dict[str, str]:
    return {"Query": t.query, "MaxTokens": str(t.max_tokens)}


# ---------------------------------------------------------------- structured memory


class _MemoryAnswer(msgspec.Struct):
    title: str
    summary: str
    entities: list[str] = []
    key_phrases: list[str] = []
    sentiment: str | None = None
    topics: list[str] = []


def _decode_memory(t: i.ExtractMemory, answer: str) -> StructuredMemory:
    a = _convert(_json(answer), _MemoryAnswer, "structured memory")
    if not a.title.strip() or not a.summary.strip():
        raise AnswerInvalid("title and summary must not be empty")
    sentiment = a.sentiment.lower().strip() if a.sentiment else None
    return StructuredMemory(
        title=a.title.strip(),
        summary=a.summary.strip(),
        entities=tuple(dict.fromkeys(e.strip() for e in a.entities if e.strip())),
        key_phrases=tuple(dict.fromkeys(p.strip() for p in a.key_phrases if p.strip())),
        sentiment=sentiment if sentiment in SENTIMENTS else None,
        topics=tuple(dict.fromkeys(x.strip().lower() for x in a.topics if x.strip())),
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


def _observe_values(t: i.Observe) -> dict[str, str]:
    v = wilmer_values(numbered_transcript(t.lines))
    v["Focus"] = observer_focus_text(t.traits)
    return v


def _decode_notes(t: i.Observe, answer: str) -> tuple[ObservationNote, ...]:
    raw = _items(_json(answer), "notes")
    notes = _convert(raw, list[_NoteAnswer], "notes")
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
                importance=_clamp(n.importance),
                observed_us=max(line.ts_us for line in picked),
                entities=tuple(dict.fromkeys(e.strip() for e in n.entities if e.strip())),
                refers_to=refers if refers and _ISO_DATE.match(refers) else None,
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


def _reflect_values(t: i.Reflect) -> dict[str, str]:
    notes = "\n".join(
        f"{n.note_id} ({iso(n.observed_us)[:10]}, {n.type}, {n.importance:.2f}): {n.text}" for n in t.notes
    )
    traces = "\n".join(f"{x.trace_id}: {x.content}" for x in t.existing)
    return {"Notes": notes or EMPTY, "ExistingTraces": traces or EMPTY}


def _decode_reflection(t: i.Reflect, answer: str) -> Reflection:
    data = _json(answer)
    if not isinstance(data, dict):
        raise AnswerInvalid('expected an object with "traces" and "contradictions"')
    a = _convert(data, _ReflectAnswer, "reflection")
    notes = {n.note_id: n for n in t.notes}
    confidence = {n.note_id: n.confidence for n in t.notes} | {x.trace_id: x.confidence for x in t.existing}
    contradictions, superseded = [], {}
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
                importance=_clamp(x.importance),
                confidence=_clamp(x.confidence),
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


def _facts_values(t: i.ExtractFacts) -> dict[str, str]:
    v = wilmer_values(numbered_transcript(t.lines))
    v["Categories"] = ingest_focus_text(ingest_policy(t.traits))
    v["MaxFacts"] = str(t.max_per_turn)
    return v


def _decode_facts(t: i.ExtractFacts, answer: str) -> tuple[Fact, ...]:
    raw = _items(_json(answer), "facts")
    facts = _convert(raw, list[_FactAnswer], "facts")
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
            importance=_clamp(f.importance),
            source_seq=line.seq,
            entities=tuple(dict.fromkeys(e.strip() for e in f.entities if e.strip())),
            message_id=line.message_id,
        )
        if fact.importance >= t.importance_threshold:
            out.append((fact.importance, order, fact))
    out.sort(key=lambda x: (-x[0], x[1]))
    return tuple(f for _, _, f in out[: t.max_per_turn])


# ---------------------------------------------------------------- compaction


class _CompactAnswer(msgspec.Struct):
    summary: str
    preserved_entities: list[str] = []
    dropped: list[str] = []


def _compact_values(t: i.Compact) -> dict[str, str]:
    v = wilmer_values(numbered_transcript(t.lines, by_id=True), chat_summary=t.previous_summary)
    v["TargetTokens"] = str(t.target_tokens)
    return v


def _decode_compaction(t: i.Compact, answer: str) -> Compaction:
    a = _convert(_json(answer), _CompactAnswer, "compaction")
    summary = a.summary.strip()
    if not summary:
        raise AnswerInvalid("the summary is empty")
    if estimate_tokens(summary) > t.target_tokens:
        # The budget is a hard limit: keep the model's best sentences that fit.
        summary, _ = summary_text(text_units([summary]), t.target_tokens)
    ids = {line_label(line): line.message_id or line_label(line) for line in t.lines}
    return Compaction(
        summary=summary,
        preserved_entities=tuple(dict.fromkeys(e.strip() for e in a.preserved_entities if e.strip())),
        dropped=tuple(dict.fromkeys(ids[d] for d in a.dropped if d in ids)),
    )


SPECS: dict[str, TaskSpec] = {
    s.task: s
    for s in (
        TaskSpec("summarize_chunk", False, _summarize_chunk_values, lambda t, a: _text(a), lambda t: t.max_tokens),
        TaskSpec("merge_summary", False, _merge_values, lambda t, a: _text(a), lambda t: t.max_tokens),
        TaskSpec("extract_memory", True, lambda t: {**wilmer_values(transcript(t.lines)), "MaxTokens": str(t.max_tokens)},
                 _decode_memory, lambda t: t.max_tokens),
        TaskSpec("observe", True, _observe_values, _decode_notes),
        TaskSpec("reflect", True, _reflect_values, _decode_reflection),
        TaskSpec("extract_facts", True, _facts_values, _decode_facts),
        TaskSpec("summarize_schema", False, _schema_values, lambda t, a: _text(a), lambda t: t.max_tokens),
        TaskSpec("hyde", False, _hyde_values, lambda t, a: _text(a), lambda t: t.max_tokens),
        TaskSpec("compact", True, _compact_values, _decode_compaction),
    )
}

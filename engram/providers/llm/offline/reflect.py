"""The offline Reflector: merge related notes into trace candidates, flag contradictions, resolve them.

Related = enough shared content words (Jaccard of stems). A contradiction = two memories about the
same subject (a shared name and overlapping content) whose polarity differs ("loves" / "doesn't
like"), whose numbers differ ("2 kids" / "3 kids"), or where the newer one is a correction.
Who wins follows the personality (engram.providers.llm.focus.resolve).
"""

from __future__ import annotations

import re
from typing import Sequence

from engram.events.background import ObservationNote
from engram.providers.llm.focus import Traits, resolve
from engram.providers.llm.offline import tuning as k
from engram.providers.llm.offline.entities import NUMBER_PATTERN, names
from engram.providers.llm.offline.sentiment import pad
from engram.providers.llm.offline.text import content_stems
from engram.providers.llm.types import Contradiction, Reflection, TraceBrief, TraceCandidate

_NEGATION = re.compile(r"\b(?:not|no|never|no longer|anymore|n['’]t|nor)\b|n['’]t\b", re.IGNORECASE)
_POSITIVE = re.compile(r"\b(?:love[sd]?|like[sd]?|enjoy(?:s|ed)?|prefer(?:s|red)?|adore[sd]?)\b", re.IGNORECASE)
_NEGATIVE = re.compile(r"\b(?:hate[sd]?|dislike[sd]?|can['’]t stand|detest[sd]?)\b", re.IGNORECASE)
TRACE_TYPE_OF_NOTE = {
    "factual": "semantic",
    "preference": "semantic",
    "correction": "semantic",
    "commitment": "prospective",
    "emotional": "episodic",
    "creative": "episodic",
}


class _Item:
    """A note or an existing trace, as the contradiction check sees it."""

    __slots__ = ("id", "text", "ts_us", "confidence", "stems", "names", "polarity", "numbers", "note")

    def __init__(self, id: str, text: str, ts_us: int, confidence: float, entities: Sequence[str], note=None):
        self.id, self.text, self.ts_us, self.confidence, self.note = id, text, ts_us, confidence, note
        self.stems = frozenset(content_stems(text))
        named = [e for e in entities if e[:1].isupper()] or [e.text for e in names(text)]
        self.names = frozenset(e.lower() for e in named)
        # +1 / -1 for a stance ("loves" / "hates", "doesn't like"); 0 when the text takes none.
        negated = bool(_NEGATION.search(text))
        sign = -1 if _NEGATIVE.search(text) else (1 if _POSITIVE.search(text) else 0)
        self.polarity = (sign or 1) * (-1 if negated else 1) if (sign or negated) else 0
        self.numbers = frozenset(m.group(0) for m in NUMBER_PATTERN.finditer(text))


def _jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def _conflict(old: _Item, new: _Item) -> str | None:
    if not (old.names & new.names) or _jaccard(old.stems, new.stems) < k.SAME_SUBJECT_SIMILARITY:
        return None
    if new.note is not None and new.note.type == "correction":
        return "correction"
    if old.polarity and new.polarity and old.polarity != new.polarity:
        return "opposite polarity"
    if old.numbers and new.numbers and old.numbers != new.numbers:
        return "different numbers"
    return None


def reflect(notes: Sequence[ObservationNote], existing: Sequence[TraceBrief], traits: Traits) -> Reflection:
    ordered = sorted(notes, key=lambda n: (n.observed_us, n.note_id))
    items = [_Item(n.note_id, n.text, n.observed_us, n.confidence, n.entities, n) for n in ordered]
    olds = [_Item(t.trace_id, t.content, t.ts_us, t.confidence, t.entities) for t in existing]

    contradictions: list[Contradiction] = []
    superseded: dict[str, None] = {}
    disputed: set[str] = set()
    # Only memories that share a name can contradict each other: index them by name.
    by_name: dict[str, list[_Item]] = {}
    for old in olds:
        for name in old.names:
            by_name.setdefault(name, []).append(old)
    for new in items:
        related: dict[str, _Item] = {}
        for name in sorted(new.names):
            for old in by_name.get(name, ()):
                related.setdefault(old.id, old)
        for old in related.values():
            reason = _conflict(old, new)
            if reason is None:
                continue
            how, winner, loser = resolve(traits, old.id, new.id, old.confidence, new.confidence)
            contradictions.append(
                Contradiction(older=old.id, newer=new.id, reason=reason, resolution=how, winner=winner, loser=loser)
            )
            if loser is not None:
                superseded[loser] = None
            else:
                disputed.update((old.id, new.id))
        for name in new.names:
            by_name.setdefault(name, []).append(new)

    # Merge the surviving notes into clusters of related content, in time order.
    clusters: list[list[_Item]] = []
    for item in items:
        if item.id in superseded:
            continue
        for cluster in clusters:
            if _jaccard(cluster[0].stems, item.stems) >= k.MERGE_SIMILARITY:
                cluster.append(item)
                break
        else:
            clusters.append([item])

    traces: list[TraceCandidate] = []
    for cluster in clusters:
        members = [c.note for c in cluster]
        best = max(members, key=lambda n: (n.importance, -n.observed_us))
        if best.importance < k.TRACE_MIN_IMPORTANCE:
            continue
        top = sorted(members, key=lambda n: (-n.importance, n.observed_us))[: k.MAX_NOTES_PER_TRACE]
        top.sort(key=lambda n: (n.observed_us, n.note_id))
        content = "; ".join(n.text for n in top)
        entities = tuple(dict.fromkeys(e for n in members for e in n.entities))
        tags = tuple(dict.fromkeys(n.type for n in members))
        if any(n.note_id in disputed for n in members):
            tags += ("disputed",)
        feeling = pad(content)
        confidence = min(1.0, sum(n.confidence for n in members) / len(members) + k.AGREEMENT_CONFIDENCE * (len(members) - 1))
        traces.append(
            TraceCandidate(
                content=content,
                trace_type=TRACE_TYPE_OF_NOTE.get(best.type, "semantic"),
                importance=best.importance,
                confidence=round(confidence, 3),
                source_note_ids=tuple(n.note_id for n in members),
                source_seqs=tuple(sorted({s for n in members for s in n.source_seqs})),
                entities=entities,
                tags=tags,
                valence=feeling.valence,
                arousal=feeling.arousal,
                dominance=feeling.dominance,
            )
        )
    return Reflection(
        traces=tuple(traces),
        contradictions=tuple(contradictions),
        consumed_note_ids=tuple(n.note_id for n in notes),
        superseded=tuple(superseded),
    )

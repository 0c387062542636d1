"""The hybrid strategy's parts: the span's observation notes, their rendering, what reflection elevates.

Hybrid compaction = Observer + Reflector + a narrative summary, run on the span being compacted:

1. **Observer**: the notes the Observer already recorded about the span's messages (the
   `ObservationsRecorded` events in the log, buffered or activated) are reused; the span's messages no
   recorded event covers are observed now (`observe`).
2. **Reflector** (`reflect`): related notes merge, contradictions are resolved by personality; the
   notes that lost (`superseded`) leave the summary. Trace candidates made only from notes the
   compaction observed itself, and important enough for auto-ingest (`importanceThreshold`), are
   encoded as traces: notes the Observer recorded are the Reflector's to elevate, so that no fact is
   encoded twice from the same note.
3. **Narrative** (`compact`): the story of the span in the tokens the notes left.

The summary is the observation log in the guide's format (a `Date:` heading, bullet notes, nested
details), then `Narrative:`. Notes get at most HYBRID_NOTES_SHARE of the node's target; the most
important first, shown in time order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from engram.events.background import ObservationNote, ObservationsRecorded
from engram.events.envelope import iso
from engram.kernel.tokens import estimate_tokens

# Share of a hybrid node's target the observation notes may take; the narrative gets the rest.
HYBRID_NOTES_SHARE = 0.5
NOTES_HEADING = "Observations:"
NARRATIVE_HEADING = "Narrative:"


@dataclass(frozen=True)
class RecordedNotes:
    """What the log's Observer output says about a span: its notes and which messages it observed."""

    notes: tuple[ObservationNote, ...] = ()
    covered: frozenset[int] = field(default_factory=frozenset)


def recorded_for_span(recorded: Iterable[ObservationsRecorded], span_seqs: Sequence[int]) -> RecordedNotes:
    """The recorded notes about the span's messages, and the span's messages some record observed."""
    wanted = set(span_seqs)
    notes: dict[str, ObservationNote] = {}
    covered: set[int] = set()
    for ev in recorded:
        covered |= {s for s in wanted if ev.first_seq <= s <= ev.last_seq}
        for note in ev.notes:
            if wanted.intersection(note.source_seqs):
                notes.setdefault(note.note_id, note)
    ordered = sorted(notes.values(), key=lambda n: (n.observed_us, n.note_id))
    return RecordedNotes(notes=tuple(ordered), covered=frozenset(covered))


def render_notes(notes: Sequence[ObservationNote]) -> str:
    """The guide's observation log: a `Date:` heading per day, then the day's notes and their details."""
    out: list[str] = []
    day = None
    for n in sorted(notes, key=lambda n: (n.observed_us, n.note_id)):
        d = iso(n.observed_us)[:10]
        if d != day:
            out.append(f"Date: {d}")
            day = d
        refers = f" (refers to {n.refers_to})" if n.refers_to and n.refers_to != d and n.refers_to not in n.text else ""
        out.append(f"- {n.text}{refers}")
        out += [f"  - {detail}" for detail in n.details]
    return "\n".join(out)


def select_notes(notes: Sequence[ObservationNote], budget_tokens: int) -> list[ObservationNote]:
    """The most important notes whose rendering fits `budget_tokens` (ties: earlier first)."""
    chosen: list[ObservationNote] = []
    for note in sorted(notes, key=lambda n: (-n.importance, n.observed_us, n.note_id)):
        trial = chosen + [note]
        if estimate_tokens(NOTES_HEADING + "\n" + render_notes(trial)) <= budget_tokens:
            chosen = trial
    return sorted(chosen, key=lambda n: (n.observed_us, n.note_id))


def hybrid_summary(notes_block: str, narrative: str) -> str:
    parts = []
    if notes_block:
        parts.append(f"{NOTES_HEADING}\n{notes_block}")
    if narrative.strip():
        parts.append(f"{NARRATIVE_HEADING} {narrative.strip()}")
    return "\n".join(parts)

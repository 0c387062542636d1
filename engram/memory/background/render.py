"""The observation log as the Wunderland guide shows it:

    Date: 2026-03-15
    - User is building a Next.js app with Supabase auth, due in 1 week
      - App uses server components with client-side hydration

Each note is a bullet (its time of day, type and importance first), its details and what it refers
to nested below. What the Reflector condensed comes first (long-term traces, by the date of their
earliest note), then the active observations. Buffered notes are not in the log yet; only counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, TypeVar

from engram.events.envelope import from_us
from engram.memory.background.observation_log import LogState, NoteEntry

_Item = TypeVar("_Item")


@dataclass(frozen=True)
class ReflectionLine:
    trace_id: str
    trace_type: str  # or RESTATED: notes saying what an existing trace says (it was verified, not copied)
    content: str
    first_observed_us: int
    notes: int
    superseded_by: str = ""  # a note it condenses was observed in a message edited or removed since (which change)


RESTATED = "restated"


def restated_lines(log: LogState) -> list[ReflectionLine]:
    """The reflections' restatements of existing traces, each shown by the text of its first note."""
    out = []
    for r in log.reflections:
        for tid, note_ids in zip(r.duplicates, r.duplicate_note_ids):
            notes = [log.notes[n].note for n in note_ids if n in log.notes]
            if notes:
                out.append(ReflectionLine(tid, RESTATED, notes[0].text, min(n.observed_us for n in notes), len(notes)))
    return out


def _date(us: int) -> str:
    return from_us(us).strftime("%Y-%m-%d")


def _time(us: int) -> str:
    return from_us(us).strftime("%H:%M")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def note_lines(entry: NoteEntry) -> list[str]:
    n = entry.note
    lines = [f"- {_time(n.observed_us)} ({n.type}, importance {n.importance:.2f}) {_one_line(n.text)}"]
    lines += [f"  - {_one_line(detail)}" for detail in n.details if detail.strip()]
    if n.refers_to:
        lines.append(f"  - refers to {n.refers_to}")
    if n.entities:
        lines.append(f"  - entities: {', '.join(n.entities)}")
    return lines


def _by_date(items: Iterable[_Item], when: Callable[[_Item], int],
             order: Callable[[_Item], Any]) -> list[tuple[str, list[_Item]]]:
    """Items grouped under their date (UTC), in `order` (stable: ties keep their recording order)."""
    groups: dict[str, list[_Item]] = {}
    for item in sorted(items, key=order):
        groups.setdefault(_date(when(item)), []).append(item)
    return list(groups.items())


def render_log(log: LogState, reflections: list[ReflectionLine], *, as_of_seq: int) -> str:
    what = f"discussion {log.scope_id}" if log.scope == "discussion" else "all discussions"
    active = log.active()
    buffered = log.with_status("buffered")
    edited = [n for n in log.notes.values() if n.superseded_by]
    condensed = [n for n in log.with_status("reflected") + log.with_status("superseded") if not n.superseded_by]
    note_tokens = log.recorded_note_tokens()
    ratio = log.compression()
    out = [
        f"# Observation log: {what} (agent {log.agent})",
        "",
        f"_As of seq {as_of_seq}: {log.messages} messages ({log.message_tokens:,} tokens) observed into "
        f"{len(log.notes)} notes ({note_tokens:,} tokens"
        + (f", {ratio:.1f}x compression" if ratio else "")
        + f"); {len(active)} active, {len(buffered)} buffered (not yet active), {len(condensed)} reflected"
        + (f", {len(edited)} superseded by edits of their messages" if edited else "") + "._",
        "",
    ]
    if reflections:
        out += ["## Reflections (long-term traces)", ""]
        for date, lines in _by_date(reflections, lambda r: r.first_observed_us, lambda r: (r.first_observed_us, r.trace_id)):
            out.append(f"Date: {date}")
            for r in lines:
                plural = "s" if r.notes != 1 else ""
                if r.trace_type == RESTATED:
                    out.append(f"- (already remembered: {r.trace_id} verified, by {r.notes} note{plural}) {_one_line(r.content)}")
                else:
                    since = f"; superseded: {r.superseded_by}" if r.superseded_by else ""
                    out.append(f"- ({r.trace_type}, from {r.notes} note{plural}{since}) {_one_line(r.content)}")
            out.append("")
    out += ["## Observations", ""]
    if not active:
        out += ["(none active yet)", ""]
    for date, items in _by_date(active, lambda e: e.note.observed_us,
                               lambda e: (e.note.observed_us, e.recorded_seq, e.note.source_seqs, e.note.note_id)):
        out.append(f"Date: {date}")
        for entry in items:
            out += note_lines(entry)
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"

"""Observation logs: the fold of the Observer's and the Reflector's events.

A log is keyed by (agent, scope, scope_id): scope "discussion" (one log per discussion) or "agent"
(one log across the agent's discussions). Each note recorded into it is, at any time:

    buffered     recorded by a background increment, waiting for the threshold (ObservationsActivated)
    active       in the observation log (activated, or recorded without buffering)
    reflected    consumed by the Reflector (condensed into traces; kept in the log, marked)
    superseded   lost a contradiction during a reflection (kept, marked)

The Observer's threshold counts message tokens, the Reflector's counts the tokens of the active
notes (`note_tokens`). The Reflector and the observation-log projection fold the same events with
this class, so that they agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engram.events.background import ObservationNote, ObservationsActivated, ObservationsRecorded, Reflected
from engram.events.control import AgentForgotten, DiscussionForgotten
from engram.events.envelope import Recorded
from engram.tokens import estimate_tokens

LogKey = tuple[str, str, str]  # (agent, scope, scope_id)
INTERESTS = frozenset({"ObservationsRecorded", "ObservationsActivated", "Reflected", "DiscussionForgotten", "AgentForgotten"})

BUFFERED, ACTIVE, REFLECTED, SUPERSEDED = "buffered", "active", "reflected", "superseded"


def note_text(note: ObservationNote) -> str:
    """What a note says: its text and its nested details."""
    return "\n".join([note.text, *note.details])


def note_tokens(note: ObservationNote) -> int:
    """A note's size in tokens (engram's one estimate): the measure of the Reflector's threshold."""
    return estimate_tokens(note_text(note))


def log_key(agent: str, scope: str, scope_id: str) -> LogKey:
    return (agent, scope, scope_id)


@dataclass
class NoteEntry:
    note: ObservationNote
    stream: str  # the discussion whose messages it observed
    recorded_seq: int
    increment_last_seq: int  # last message seq of the increment that recorded it
    buffered: bool
    status: str
    tokens: int
    activated_seq: int | None = None
    reflected_seq: int | None = None


@dataclass
class ReflectionEntry:
    seq: int
    ts_us: int
    stream: str
    trace_ids: tuple[str, ...]
    consumed: int
    input_tokens: int
    output_tokens: int
    duplicates: tuple[str, ...] = ()  # existing traces the reflection restated (verified, not stored again)
    duplicate_note_ids: tuple[tuple[str, ...], ...] = ()  # per restated trace: the notes that restated it


@dataclass
class LogState:
    agent: str
    scope: str
    scope_id: str
    notes: dict[str, NoteEntry] = field(default_factory=dict)  # in recording order
    messages: int = 0  # messages observed (buffered or not)
    message_tokens: int = 0
    increments: int = 0
    activations: int = 0
    reflections: list[ReflectionEntry] = field(default_factory=list)
    last_seq: int = 0

    @property
    def key(self) -> LogKey:
        return (self.agent, self.scope, self.scope_id)

    def with_status(self, status: str) -> list[NoteEntry]:
        return [n for n in self.notes.values() if n.status == status]

    def active(self) -> list[NoteEntry]:
        return self.with_status(ACTIVE)

    def active_tokens(self) -> int:
        return sum(n.tokens for n in self.notes.values() if n.status == ACTIVE)

    def recorded_note_tokens(self) -> int:
        return sum(n.tokens for n in self.notes.values())

    def compression(self) -> float | None:
        """Observed message tokens per note token (the guide: 5-40x)."""
        out = self.recorded_note_tokens()
        return round(self.message_tokens / out, 3) if out else None


class ObservationLog:
    def __init__(self) -> None:
        self.logs: dict[LogKey, LogState] = {}

    def log(self, key: LogKey) -> LogState:
        st = self.logs.get(key)
        if st is None:
            st = self.logs[key] = LogState(*key)
        return st

    def apply(self, rec: Recorded) -> set[LogKey]:
        """Fold one event; returns the logs it changed (forgotten logs included)."""
        e = rec.event
        if isinstance(e, ObservationsRecorded):
            st = self.log(log_key(rec.agent, e.scope, e.scope_id or rec.stream))
            status = BUFFERED if e.buffered else ACTIVE
            for note in e.notes:
                if note.note_id in st.notes:
                    continue  # recorded once; a repeated id is the same note
                st.notes[note.note_id] = NoteEntry(
                    note=note, stream=rec.stream, recorded_seq=rec.seq, increment_last_seq=e.last_seq,
                    buffered=e.buffered, status=status, tokens=note_tokens(note),
                    activated_seq=None if e.buffered else rec.seq,
                )
            st.messages += e.messages
            st.message_tokens += e.input_tokens
            st.increments += 1
            st.last_seq = rec.seq
            return {st.key}
        if isinstance(e, ObservationsActivated):
            st = self.log(log_key(rec.agent, e.scope, e.scope_id or rec.stream))
            for n in st.notes.values():
                if n.status == BUFFERED and n.increment_last_seq <= e.through_seq:
                    n.status, n.activated_seq = ACTIVE, rec.seq
            st.activations += 1
            st.last_seq = rec.seq
            return {st.key}
        if isinstance(e, Reflected):
            st = self.log(log_key(rec.agent, e.scope, e.scope_id or rec.stream))
            superseded = set(e.superseded)
            for nid in e.consumed_note_ids:
                n = st.notes.get(nid)
                if n is not None:
                    n.status = SUPERSEDED if nid in superseded else REFLECTED
                    n.reflected_seq = rec.seq
            st.reflections.append(
                ReflectionEntry(rec.seq, rec.ts_us, rec.stream, tuple(e.trace_ids), len(e.consumed_note_ids),
                                e.input_tokens, e.output_tokens, tuple(e.duplicates),
                                tuple(tuple(ids) for ids in e.duplicate_note_ids))
            )
            st.last_seq = rec.seq
            return {st.key}
        if isinstance(e, DiscussionForgotten):
            return self._forget_discussion(rec.agent, e.discussion_id)
        if isinstance(e, AgentForgotten):
            gone = {k for k in self.logs if k[0] == e.agent_id}
            for k in gone:
                del self.logs[k]
            return gone
        return set()

    def drop_consumed(self, key: LogKey) -> None:
        """Let go of the notes a reflection consumed (a reader that only needs what is still to reflect)."""
        st = self.logs.get(key)
        if st is not None:
            st.notes = {nid: n for nid, n in st.notes.items() if n.status in (BUFFERED, ACTIVE)}

    def _forget_discussion(self, agent: str, discussion: str) -> set[LogKey]:
        changed = set()
        for key in list(self.logs):
            if key[0] != agent:
                continue
            if key[1] == "discussion" and key[2] == discussion:
                del self.logs[key]
                changed.add(key)
                continue
            st = self.logs[key]
            kept = {nid: n for nid, n in st.notes.items() if n.stream != discussion}
            if len(kept) != len(st.notes) or any(r.stream == discussion for r in st.reflections):
                st.notes = kept
                st.reflections = [r for r in st.reflections if r.stream != discussion]
                changed.add(key)
        return changed

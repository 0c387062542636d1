"""Observation logs: the fold of the Observer's and the Reflector's events.

A log is keyed by (agent, scope, scope_id): scope "discussion" (one log per discussion) or "agent"
(one log across the agent's discussions). Each note recorded into it is, at any time:

    buffered     recorded by a background increment, waiting for the threshold (ObservationsActivated)
    active       in the observation log (activated, or recorded without buffering)
    reflected    consumed by the Reflector (condensed into traces; kept in the log, marked)
    superseded   lost a contradiction during a reflection (kept, marked), or was observed in a message that was
                 edited or removed since (`MessageEdited` / `MessageRemoved`; `superseded_by` says which): the
                 Observer reads the words a message was appended with, so a note of a changed message says what
                 the conversation no longer says, whenever it was recorded. A note already reflected is marked
                 too; the traces it became are superseded by the trace book (their source messages are the same).

The Observer's threshold counts message tokens, the Reflector's counts the tokens of the active
notes (`note_tokens`). The Reflector and the observation-log projection fold the same events with
this class, so that they agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Iterable

from engram.config import defaults as d
from engram.events.background import ObservationNote, ObservationsActivated, ObservationsRecorded, Reflected
from engram.events.control import AgentForgotten, DiscussionForgotten, SettingsChanged
from engram.events.envelope import Recorded
from engram.events.messages import CONVERSATION_ROLES, MessageAppended, MessageEdited, MessageRemoved
from engram.kernel.records import Column
from engram.kernel.tokens import estimate_tokens
from engram.memory.cognitive.llm_bridge import injected_memory, own_words
from engram.memory.settings import SettingsView

LogKey = tuple[str, str, str]  # (agent, scope, scope_id)
# What the Observer runs with for an agent without settings of its own: (enabled, scope, thresholds).
_OBSERVING_DEFAULTS = (True, "discussion", d.OBSERVER_ACTIVATION_TOKENS, d.REFLECTOR_ACTIVATION_TOKENS)
INTERESTS = frozenset({"ObservationsRecorded", "ObservationsActivated", "Reflected", "DiscussionForgotten", "AgentForgotten",
                       "MessageEdited", "MessageRemoved"})
# With these too, a log also knows how far it is from the Observer's and the Reflector's thresholds (`Progress`).
PROGRESS_INTERESTS = INTERESTS | {"MessageAppended", "SettingsChanged"}

BUFFERED, ACTIVE, REFLECTED, SUPERSEDED = "buffered", "active", "reflected", "superseded"


def note_text(note: ObservationNote) -> str:
    """What a note says: its text and its nested details."""
    return "\n".join([note.text, *note.details])


def note_tokens(note: ObservationNote) -> int:
    """A note's size in tokens (engram's one estimate): the measure of the Reflector's threshold."""
    return estimate_tokens(note_text(note))


def _watched(msg: MessageAppended) -> bool:
    """Whether the Observer watches a message: the conversation (system prompts are not), with words of its
    speaker's own (an assistant's quotes of memory are not)."""
    role = msg.role
    if role not in CONVERSATION_ROLES:
        return False
    if role == "assistant":
        return bool(own_words(role, msg.content, injected_memory(msg.metadata)).strip())
    return bool(msg.content.strip())


def log_key(agent: str, scope: str, scope_id: str) -> LogKey:
    return (agent, scope, scope_id)


@dataclass(kw_only=True)
class NoteEntry:
    """A note of a log and where it stands. Declared once: a row of `observation_notes` (`engram.kernel.records`,
    behind the log's agent, scope and scope id) is this record, the note's own fields flattened in; the Reflector's
    snapshot pickles it (the field order is not its pickled shape)."""

    stream: str  # the discussion whose messages it observed
    note: Annotated[ObservationNote, Column(flatten=True)]
    tokens: int
    buffered: bool
    status: str
    recorded_seq: int
    increment_last_seq: int  # last message seq of the increment that recorded it
    activated_seq: int | None = None
    reflected_seq: int | None = None
    superseded_by: str = ""  # "edit of message <id>" / "removal of message <id>": what the note no longer matches


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
    # How far the log is from activation (folded only with PROGRESS_INTERESTS): the tokens of the conversation
    # the Observer watches for this log, the tokens of those whose notes joined the log, and the thresholds.
    conversation_tokens: int = 0
    joined_tokens: int = 0
    observer_threshold: int = d.OBSERVER_ACTIVATION_TOKENS
    reflector_threshold: int = d.REFLECTOR_ACTIVATION_TOKENS

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

    def progress(self) -> "Progress":
        """Where the log stands against the guide's thresholds (which stay as they are: 30,000 and 40,000 tokens)."""
        unobserved = max(0, self.conversation_tokens - self.joined_tokens)
        active = self.active_tokens()
        return Progress(
            unobserved_tokens=unobserved, observer_threshold=self.observer_threshold,
            tokens_to_observer=max(0, self.observer_threshold - unobserved + 1),
            active_tokens=active, reflector_threshold=self.reflector_threshold,
            tokens_to_reflector=max(0, self.reflector_threshold - active + 1),
        )

    def compression(self) -> float | None:
        """Observed message tokens per note token (the guide: 5-40x)."""
        out = self.recorded_note_tokens()
        return round(self.message_tokens / out, 3) if out else None


@dataclass(frozen=True)
class Progress:
    """A log against its thresholds. The Observer activates once the tokens not yet in the log exceed its
    threshold; `tokens_to_observer` more tokens of conversation get it there (0: at the next message or
    increment). Likewise the Reflector with the log's active note tokens. Without this, what the guide's
    numbers leave out on a normal conversation (a 20,000-token chat never reaches 30,000) is invisible."""

    unobserved_tokens: int
    observer_threshold: int
    tokens_to_observer: int
    active_tokens: int
    reflector_threshold: int
    tokens_to_reflector: int


class ObservationLog:
    def __init__(self) -> None:
        self.logs: dict[LogKey, LogState] = {}
        self.settings: SettingsView | None = None  # folded only with PROGRESS_INTERESTS
        # Per agent, what the Observer runs with: (enabled, scope, observer threshold, reflector threshold).
        self.observing: dict[str, tuple[bool, str, int, int]] = {}
        # (agent, discussion, message id) -> "edit of message <id>" / "removal of message <id>" (its latest change).
        self.message_changes: dict[tuple[str, str, str], str] = {}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("message_changes", {})  # the Reflector's snapshot from before notes followed edits

    def log(self, key: LogKey) -> LogState:
        st = self.logs.get(key)
        if st is None:
            st = self.logs[key] = LogState(*key)
            if key[0] in self.observing:
                _, _, st.observer_threshold, st.reflector_threshold = self.observing[key[0]]
        return st

    def message(self, rec: Recorded) -> LogKey | None:
        """A message the Observer will watch: its tokens count toward its log's threshold. Returns the log it
        changed (None: a message the Observer does not watch)."""
        return next(iter(self.messages([rec])), None)

    def messages(self, recs: Iterable[Recorded]) -> dict[LogKey, int]:
        """A run of messages (nothing else in between), each folded as `message` folds it, in order: the logs they
        changed, each with the seq of its last message (in the order they were first changed). Most of a log is
        messages, so this is kept to a few look-ups per message: each discussion's log is found once per run, and the
        assistant's own words are worked out only for the assistant (`own_words` returns any other speaker's text as
        it is)."""
        logs: dict[tuple[str, str], tuple[LogState, LogKey] | None] = {}
        changed: dict[LogKey, int] = {}
        for rec in recs:
            msg = rec.event
            assert isinstance(msg, MessageAppended), rec.type
            if not _watched(msg):
                continue
            where = (rec.agent, rec.stream)
            if where in logs:
                found = logs[where]
            else:
                found = logs[where] = self._message_log(rec.agent, rec.stream)
            if found is None:
                continue
            st, key = found
            st.conversation_tokens += msg.token_estimate
            changed[key] = rec.seq
        return changed

    def _message_log(self, agent: str, stream: str) -> tuple[LogState, LogKey] | None:
        """The log a watched message of `stream` counts toward, and its key (None: the agent's Observer is off)."""
        enabled, scope, _, _ = self.observing.get(agent, _OBSERVING_DEFAULTS)
        if not enabled:
            return None
        st = self.log((agent, scope, stream if scope == "discussion" else agent))
        return st, st.key

    def apply(self, rec: Recorded) -> set[LogKey]:
        """Fold one event; returns the logs it changed (forgotten logs included)."""
        e = rec.event
        if isinstance(e, SettingsChanged):
            self.settings = self.settings or SettingsView()
            self.settings.apply(rec)
            changed = set()
            if rec.stream.startswith("agent:"):
                cfg = self.settings.agent_config(rec.agent)
                o = cfg.memory.observer
                self.observing[rec.agent] = (o.enabled, o.scope, o.activation_tokens, cfg.memory.reflector.activation_tokens)
                for key, st in self.logs.items():
                    if key[0] == rec.agent:
                        st.observer_threshold = o.activation_tokens
                        st.reflector_threshold = cfg.memory.reflector.activation_tokens
                        changed.add(key)
            return changed
        if isinstance(e, MessageAppended):
            watched = self.message(rec)
            return set() if watched is None else {watched}
        if isinstance(e, ObservationsRecorded):
            st = self.log(log_key(rec.agent, e.scope, e.scope_id or rec.stream))
            status = BUFFERED if e.buffered else ACTIVE
            for note in e.notes:
                if note.note_id in st.notes:
                    continue  # recorded once; a repeated id is the same note
                st.notes[note.note_id] = entry = NoteEntry(
                    note=note, stream=rec.stream, recorded_seq=rec.seq, increment_last_seq=e.last_seq,
                    buffered=e.buffered, status=status, tokens=note_tokens(note),
                    activated_seq=None if e.buffered else rec.seq,
                )
                labels = [self.message_changes.get((rec.agent, rec.stream, m)) for m in note.source_message_ids]
                label = next((c for c in labels if c), None)
                if label:
                    entry.status, entry.superseded_by = SUPERSEDED, label
            st.messages += e.messages
            st.message_tokens += e.input_tokens
            if not e.buffered:
                st.joined_tokens += e.input_tokens
            st.increments += 1
            st.last_seq = rec.seq
            return {st.key}
        if isinstance(e, ObservationsActivated):
            st = self.log(log_key(rec.agent, e.scope, e.scope_id or rec.stream))
            for n in st.notes.values():
                if n.status == BUFFERED and n.increment_last_seq <= e.through_seq:
                    n.status, n.activated_seq = ACTIVE, rec.seq
            st.activations += 1
            st.joined_tokens += e.message_tokens
            st.last_seq = rec.seq
            return {st.key}
        if isinstance(e, Reflected):
            st = self.log(log_key(rec.agent, e.scope, e.scope_id or rec.stream))
            superseded = set(e.superseded)
            for nid in e.consumed_note_ids:
                consumed = st.notes.get(nid)
                if consumed is not None:
                    consumed.status = SUPERSEDED if nid in superseded else REFLECTED
                    consumed.reflected_seq = rec.seq
            st.reflections.append(
                ReflectionEntry(rec.seq, rec.ts_us, rec.stream, tuple(e.trace_ids), len(e.consumed_note_ids),
                                e.input_tokens, e.output_tokens, tuple(e.duplicates),
                                tuple(tuple(ids) for ids in e.duplicate_note_ids))
            )
            st.last_seq = rec.seq
            return {st.key}
        if isinstance(e, (MessageEdited, MessageRemoved)):
            return self._message_changed(rec, e)
        if isinstance(e, DiscussionForgotten):
            self.message_changes = {k: v for k, v in self.message_changes.items()
                                    if (k[0], k[1]) != (rec.agent, e.discussion_id)}
            return self._forget_discussion(rec.agent, e.discussion_id)
        if isinstance(e, AgentForgotten):
            self.message_changes = {k: v for k, v in self.message_changes.items() if k[0] != e.agent_id}
            gone = {k for k in self.logs if k[0] == e.agent_id}
            for k in gone:
                del self.logs[k]
            return gone
        return set()

    def _message_changed(self, rec: Recorded, e: MessageEdited | MessageRemoved) -> set[LogKey]:
        """Every note of the agent observed in message `e.message_id` of this discussion is superseded."""
        label = f"{'edit' if isinstance(e, MessageEdited) else 'removal'} of message {e.message_id}"
        self.message_changes[(rec.agent, rec.stream, e.message_id)] = label
        changed = set()
        for key, st in self.logs.items():
            if key[0] != rec.agent:
                continue
            for n in st.notes.values():
                if n.stream == rec.stream and e.message_id in n.note.source_message_ids and not n.superseded_by:
                    n.status, n.superseded_by = SUPERSEDED, label
                    st.last_seq = rec.seq
                    changed.add(key)
        return changed

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

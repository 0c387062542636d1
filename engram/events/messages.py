"""Conversation events: the raw material every memory is made from."""

from __future__ import annotations

from typing import Any, ClassVar, Iterable

from engram.events.base import Event
from engram.events.envelope import Recorded

# The roles a message may have, and those of the conversation itself (what the Observer watches and auto-ingest
# reads; a system prompt is neither).
ROLES = frozenset({"user", "assistant", "system", "tool"})
CONVERSATION_ROLES = frozenset({"user", "assistant", "tool"})


class MessageAppended(Event, tag="MessageAppended", frozen=True):
    """A chat message of a discussion (stream = discussion id). Content is stored tag-free."""

    SCHEMA_VERSION: ClassVar[int] = 1
    role: str  # "user" | "assistant" | "system" | "tool"
    content: str
    message_id: str  # client id when given, else derived deterministically at ingest
    token_estimate: int
    name: str | None = None  # speaker name (LoCoMo speakers, OpenAI `name`)
    metadata: dict[str, str] = {}

    def identity(self) -> tuple[Any, ...]:
        # The same message id with the same role and words is the same message sent again (a client's retry); with
        # other words it is a client's bug, refused instead of silently dropped. Time, speaker name and metadata
        # may differ (the first recorded stands).
        return (self.role, self.content)

    def id_label(self, event_id: str) -> str:
        return f"message id {self.message_id!r}"


class ToolCallFailed(Event, tag="ToolCallFailed", frozen=True):
    """A tool call of the agent failed; the tool-failure learner turns it into a lesson."""

    tool: str
    error: str
    arguments: str = ""
    call_id: str | None = None

    def identity(self) -> tuple[Any, ...]:
        return (self.tool, self.error, self.arguments)

    def id_label(self, event_id: str) -> str:
        return f"tool call id {self.call_id!r}"


class MessageEdited(Event, tag="MessageEdited", frozen=True):
    """A message of the discussion said otherwise (a front end's edit or swipe, or the REST edit): from this event on
    the message `message_id` reads `content`. The `MessageAppended` it replaces stays in the log (replay folds both,
    in order); every memory made from the old text is superseded (`engram.memory.ingest.edits`). Erased with the
    message when its discussion or agent is forgotten."""

    message_id: str  # the message it replaces (its id stays: a later edit replaces this one)
    role: str  # the replaced message's, so a consumer needs no lookup
    content: str
    token_estimate: int
    name: str | None = None
    source: str = ""  # who edited: "openai proxy" (a resent history) | "api"

    def check(self) -> None:
        if not self.message_id:
            raise ValueError("message_id is empty")
        if self.role not in ROLES:
            raise ValueError(f"role {self.role!r} is not one of {', '.join(sorted(ROLES))}")
        if not self.content.strip():
            raise ValueError("content is empty: remove the message instead")

    def identity(self) -> tuple[Any, ...]:
        return (self.message_id, self.content)


class MessageRemoved(Event, tag="MessageRemoved", frozen=True):
    """A message of the discussion taken back (a front end's delete, a swipe or regenerate that dropped a reply, or the
    REST delete): from this event on the conversation holds it no more. Its text stays in the log for replay, as an
    edit's does; every memory made from it is superseded."""

    message_id: str
    source: str = ""
    reason: str = ""

    def check(self) -> None:
        if not self.message_id:
            raise ValueError("message_id is empty")

    def identity(self) -> tuple[Any, ...]:
        return (self.message_id,)


MESSAGE_TYPES = ("MessageAppended", "MessageEdited", "MessageRemoved")


def change_event_id(change: str, message_id: str, prior: int | None, key: str = "") -> str:
    """The event id of a change of message `message_id` ("edit" to the words of message key `key`, "removed",
    "restored": an edit of a removed message), given the seq of the message's latest change before it (`prior`; None:
    never changed). The same change of the same state is the same id (a retried request records it once); a message
    removed, brought back and removed again, or edited back and forth, is recorded each time."""
    if change == "edit":
        return f"edit:{message_id}:{key}" + (f":{prior}" if prior is not None else "")
    if change == "restored":
        return f"restored:{message_id}:{prior}"
    return f"removed:{message_id}" + (f":{prior}" if prior is not None else "")


def as_appended(rec: Recorded, replaced: MessageAppended) -> Recorded:
    """An edit (`rec`, a `MessageEdited`) as the message it makes of `replaced`: the same id, role and metadata with
    the new words, at the edit's position and time (what auto-ingest and the summarizer read as the message now)."""
    e = rec.event
    assert isinstance(e, MessageEdited)
    message = MessageAppended(role=replaced.role, content=e.content, message_id=replaced.message_id,
                              token_estimate=e.token_estimate, name=e.name if e.name is not None else replaced.name,
                              metadata=replaced.metadata)
    return Recorded(seq=rec.seq, stream=rec.stream, stream_version=rec.stream_version, agent=rec.agent,
                    ts_us=rec.ts_us, event=message, causation=rec.causation, event_id=rec.event_id, shard=rec.shard)


def conversation(records: Iterable[Recorded]) -> list[Recorded]:
    """The messages of a discussion as its conversation holds them now, in their order: `records` (its
    MESSAGE_TYPES events, in log order) with every edit applied — an edited message at its own place with its new
    words (a `MessageAppended` of its id, the original's seq and time), a removed one left out until an edit brings it
    back (a front end's swipe back to the reply a regenerate dropped: `MessageEdited` of a removed message). Pure."""
    by_id: dict[str, Recorded] = {}
    removed: set[str] = set()
    for rec in records:
        e = rec.event
        if isinstance(e, MessageAppended):
            by_id[e.message_id] = rec
            removed.discard(e.message_id)
        elif isinstance(e, MessageEdited):
            old = by_id.get(e.message_id)
            if old is None:
                continue
            edited = as_appended(rec, old.event)  # type: ignore[arg-type]
            by_id[e.message_id] = Recorded(seq=old.seq, stream=old.stream, stream_version=old.stream_version,
                                           agent=old.agent, ts_us=old.ts_us, event=edited.event,
                                           causation=old.causation, event_id=old.event_id, shard=old.shard)
            removed.discard(e.message_id)
        elif isinstance(e, MessageRemoved):
            if e.message_id in by_id:
                removed.add(e.message_id)
    return sorted((r for m, r in by_id.items() if m not in removed), key=lambda r: r.seq)

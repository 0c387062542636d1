"""Conversation events: the raw material every memory is made from."""

from __future__ import annotations

from typing import Any, ClassVar

from engram.events.base import Event

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

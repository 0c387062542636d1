"""Conversation events: the raw material every memory is made from."""

from __future__ import annotations

from typing import ClassVar

from engram.events.base import Event


class MessageAppended(Event, tag="MessageAppended"):
    """A chat message of a discussion (stream = discussion id). Content is stored tag-free."""

    SCHEMA_VERSION: ClassVar[int] = 1
    role: str  # "user" | "assistant" | "system" | "tool"
    content: str
    message_id: str  # client id when given, else derived deterministically at ingest
    token_estimate: int
    name: str | None = None  # speaker name (LoCoMo speakers, OpenAI `name`)
    metadata: dict[str, str] = {}


class ToolCallFailed(Event, tag="ToolCallFailed"):
    """A tool call of the agent failed; the tool-failure learner turns it into a lesson."""

    tool: str
    error: str
    arguments: str = ""
    call_id: str | None = None

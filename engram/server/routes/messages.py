"""Writing: messages and failed tool calls."""

from __future__ import annotations

from fastapi import APIRouter

from engram.api import types as t
from engram.api.access import ScopedApi
from engram.server.endpoint import route

router = APIRouter(tags=["messages"])
WRITE_ERRORS = ("invalid_id", "malformed_messages", "bad_settings", "conflict")


@route(router, "POST", "/v1/agents/{agent}/messages", body=t.AppendConversationsRequest, response=t.AppendResponse,
       errors=WRITE_ERRORS)
def append_conversations(api: ScopedApi, agent: str, body: t.AppendConversationsRequest) -> t.AppendResponse:
    """Append the messages of several discussions of one agent; they commit together, all or none."""
    return api.append_conversations(agent, body)


@route(router, "POST", "/v1/agents/{agent}/discussions/{discussion}/messages", body=t.AppendRequest,
       response=t.AppendResponse, errors=WRITE_ERRORS)
def append_messages(api: ScopedApi, agent: str, discussion: str, body: t.AppendRequest) -> t.AppendResponse:
    """Append messages to a discussion ([DiscussionId] tags stripped, empty messages dropped, messages already
    recorded recognised by id)."""
    return api.append_messages(agent, discussion, body)


@route(router, "POST", "/v1/agents/{agent}/discussions/{discussion}/tool-failures", body=t.ToolFailureRequest,
       response=t.EventResponse, errors=WRITE_ERRORS)
def tool_failure(api: ScopedApi, agent: str, discussion: str, body: t.ToolFailureRequest) -> t.EventResponse:
    """Record a failed tool call; known failures become procedural lessons of the agent."""
    return api.record_tool_failure(agent, discussion, body)


@route(router, "POST", "/v1/agents/{agent}/settings", response=t.SettingsRecorded, errors=("invalid_id", "bad_settings"))
def record_settings(api: ScopedApi, agent: str) -> t.SettingsRecorded:
    """Record the agent's settings files in the log now if they changed (every write does it too)."""
    return api.record_settings(agent)


MSG = "/v1/agents/{agent}/discussions/{discussion}/messages/{message_id}"


@route(router, "PATCH", MSG, body=t.MessageEdit, response=t.MessageChanged,
       errors=("invalid_id", "not_found", "malformed_messages"))
def edit_message(api: ScopedApi, agent: str, discussion: str, message_id: str, body: t.MessageEdit) -> t.MessageChanged:
    """New words for one message (an edit, as a chat front end makes one): recorded as an event that points at the
    message, the old words kept for replay; every memory made from them is superseded."""
    return api.edit_message(agent, discussion, message_id, body)


@route(router, "DELETE", MSG, response=t.MessageChanged, errors=("invalid_id", "not_found"))
def remove_message(api: ScopedApi, agent: str, discussion: str, message_id: str, reason: str = "") -> t.MessageChanged:
    """Take one message back: recorded as an event, its words kept for replay (forget the discussion to erase
    them); every memory made from it is superseded."""
    return api.remove_message(agent, discussion, message_id, reason)

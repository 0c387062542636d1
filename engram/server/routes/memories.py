"""One memory at a time: get, edit and delete a single trace (or fact) of an agent."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter

from engram.api import types as t
from engram.api.access import ScopedApi
from engram.server.endpoint import route

router = APIRouter(tags=["memories"])
M = "/v1/agents/{agent}/memories/{kind}/{memory_id}"
Kind = Literal["trace", "fact", "chunk", "vector"]


@route(router, "GET", M, response=t.MemoryItem, errors=("invalid_id", "invalid_request", "not_found"))
def get_memory(api: ScopedApi, agent: str, kind: Kind, memory_id: str) -> t.MemoryItem:
    """One memory as it is now (after every edit): its text, metadata, discussion and when it was made."""
    return api.memory(agent, kind, memory_id)


@route(router, "PATCH", M, body=t.MemoryEdit, response=t.MemoryEdited,
       errors=("invalid_id", "invalid_request", "not_found", "runtime_unavailable"))
def edit_memory(api: ScopedApi, agent: str, kind: Kind, memory_id: str, body: t.MemoryEdit) -> t.MemoryEdited:
    """A new text and/or metadata for one memory, recorded as an event that supersedes the old form; answers once
    recall and the read models show the new form."""
    return api.edit_memory(agent, kind, memory_id, body)


@route(router, "DELETE", M, response=t.Job, status=202, errors=("invalid_id", "invalid_request", "not_found"))
def delete_memory(api: ScopedApi, agent: str, kind: Kind, memory_id: str, reason: str = "") -> t.Job:
    """Start a job erasing one memory: its text leaves the log file, every projection, index and cache (as
    forgetting a discussion does; the messages it was made from stay)."""
    return api.delete_memory(agent, kind, memory_id, t.ForgetRequest(reason=reason))

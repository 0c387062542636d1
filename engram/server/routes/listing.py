"""Listing and paging: agents, an agent's discussions, a discussion's messages, an agent's memories of each kind."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from engram.api import types as t
from engram.api.access import ScopedApi
from engram.server.endpoint import route

router = APIRouter(tags=["listing"])
A = "/v1/agents/{agent}"
Page = Annotated[int, Query(ge=1, le=t.MAX_PAGE, description="rows a page holds at most")]
Cursor = Annotated[str | None, Query(max_length=4096, description="a page's `next_cursor`: the page after it")]


@route(router, "GET", "/v1/agents", response=t.AgentList, access="key")
def list_agents(api: ScopedApi) -> t.AgentList:
    """The agents this key may see (every agent for an admin key), with discussions, messages, active traces and
    first and last activity."""
    return api.list_agents()


@route(router, "GET", f"{A}/discussions", response=t.DiscussionList, errors=("invalid_id", "invalid_request"),
       reads="log")
def list_discussions(api: ScopedApi, agent: str, limit: Page = 100, cursor: Cursor = None) -> t.DiscussionList:
    """The agent's discussions by id, a page at a time."""
    return api.list_discussions(agent, limit=limit, cursor=cursor)


@route(router, "GET", f"{A}/discussions/{{discussion}}/messages", response=t.MessagePage,
       errors=("invalid_id", "unknown_discussion", "invalid_request"), reads="log")
def list_messages(api: ScopedApi, agent: str, discussion: str, order: t.PageOrder = "oldest", limit: Page = 100,
                  cursor: Cursor = None) -> t.MessagePage:
    """A discussion's messages, oldest or newest first, a page at a time (`cursor`: the seq of the last message
    you have). Oldest first, following `next_cursor` gives every message once, also while messages arrive."""
    return api.list_messages(agent, discussion, order=order, limit=limit, cursor=cursor)


@route(router, "GET", f"{A}/memories", response=t.MemoryPage, errors=("invalid_id", "unknown_discussion",
                                                                       "invalid_request"), reads="memories")
def list_memories(api: ScopedApi, agent: str, kind: t.ListedKind = "traces", discussion: str | None = None, limit: Page = 100,
                  cursor: Cursor = None) -> t.MemoryPage:
    """The agent's memories of one kind (traces, chunk memories, vector memories, observation notes) in the order
    they were made, a page at a time; only one discussion's with `discussion`."""
    return api.list_memories(agent, kind, discussion=discussion, limit=limit, cursor=cursor)

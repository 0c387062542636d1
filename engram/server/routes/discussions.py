"""Discussion memory (WilmerAI), infinite context, workflows, chat, regeneration and forgetting."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from engram.api import types as t
from engram.api.access import ScopedApi
from engram.server.endpoint import route

router = APIRouter(tags=["discussions"])
D = "/v1/agents/{agent}/discussions/{discussion}"
READ_ERRORS = ("invalid_id", "unknown_discussion")


@route(router, "POST", f"{D}/search", body=t.SearchRequest, response=t.SearchResponse, errors=(*READ_ERRORS, "bad_query"),
       reads="discussion")
def search(api: ScopedApi, agent: str, discussion: str, body: t.SearchRequest) -> t.SearchResponse:
    """VectorMemorySearch over the discussion's vector memory: keywords separated by ";" (keyword, semantic, hybrid)."""
    return api.search(agent, discussion, body)


@route(router, "GET", f"{D}/memories", response=t.MemoriesResponse, errors=READ_ERRORS, reads="discussion")
def memories(api: ScopedApi, agent: str, discussion: str, last: Annotated[int, Query(ge=1, le=t.MAX_ROWS)] | None = None) -> t.MemoriesResponse:
    """The chunk memories of `<id>_memories.jsonl`, oldest first (only the last `last` when given)."""
    return api.memories(agent, discussion, last)


@route(router, "GET", f"{D}/summary", response=t.SummaryResponse, errors=READ_ERRORS, reads="discussion")
def summary(api: ScopedApi, agent: str, discussion: str) -> t.SummaryResponse:
    """The rolling summary of `<id>_summary.jsonl` (null before the first one)."""
    return api.summary(agent, discussion)


@route(router, "GET", f"{D}/compactions", response=t.CompactionsResponse, errors=READ_ERRORS, reads="context")
def compactions(api: ScopedApi, agent: str, discussion: str) -> t.CompactionsResponse:
    """Every context compaction of the discussion and the summary chain now."""
    return api.compactions(agent, discussion)


@route(router, "GET", f"{D}/context", response=t.ContextResponse, errors=READ_ERRORS, reads="context")
def context(api: ScopedApi, agent: str, discussion: str, query: str | None = None, recall: bool = True) -> t.ContextResponse:
    """The context that would be sent to the model now, block by block within its budgets."""
    return api.context(agent, discussion, query=query, recall=recall)


@route(router, "POST", f"{D}/regenerate", body=t.RegenerateRequest, response=t.Job, status=202,
       errors=(*READ_ERRORS, "bad_settings"))
def regenerate(api: ScopedApi, agent: str, discussion: str, body: t.RegenerateRequest) -> t.Job:
    """Start a regeneration job: a new generation of the discussion's memories from its full history."""
    return api.regenerate(agent, discussion, body)


@route(router, "POST", f"{D}/replay", body=t.DiscussionReplayRequest, response=t.Job, status=202, errors=READ_ERRORS)
def replay_discussion(api: ScopedApi, agent: str, discussion: str, body: t.DiscussionReplayRequest) -> t.Job:
    """Start a job rebuilding the discussion's three memory files from the log (or comparing them: verify)."""
    return api.replay_discussion(agent, discussion, body)


@route(router, "DELETE", D, response=t.Job, status=202, errors=READ_ERRORS)
def forget_discussion(api: ScopedApi, agent: str, discussion: str, reason: str = "") -> t.Job:
    """Start a job erasing the discussion: from the projections and from the log file (cannot be undone)."""
    return api.forget(agent, discussion, t.ForgetRequest(reason=reason))


@route(router, "GET", f"{D}/chat", response=t.ChatInfo, errors=("invalid_id", "conflict"))
def chat_info(api: ScopedApi, agent: str, discussion: str) -> t.ChatInfo:
    """Where a chat stands: earlier messages and who answers."""
    return api.chat_info(agent, discussion)


@route(router, "POST", f"{D}/chat", body=t.ChatRequest, response=t.ChatResponse,
       errors=("invalid_id", "conflict", "malformed_messages", "llm_error", "llm_unavailable"))
def chat(api: ScopedApi, agent: str, discussion: str, body: t.ChatRequest) -> t.ChatResponse:
    """One chat turn with memory: the message and the reply are appended; memory creation runs behind it."""
    return api.chat(agent, discussion, body)


@route(router, "POST", "/v1/agents/{agent}/workflows/run", body=t.WorkflowRequest, response=t.WorkflowResponse,
       errors=("invalid_id", "bad_workflow", "unknown_workflow", "bad_settings", "malformed_messages", "llm_error",
               "llm_unavailable"))
def run_workflow(api: ScopedApi, agent: str, body: t.WorkflowRequest) -> t.WorkflowResponse:
    """Run a WilmerAI workflow of memory nodes (its messages appended to the discussion first)."""
    return api.run_workflow(agent, body)

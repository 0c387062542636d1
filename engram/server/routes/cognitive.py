"""Cognitive memory (Wunderland): recall, traces, working memory, mood, observations, consolidations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from engram.api import types as t
from engram.api.access import ScopedApi
from engram.server.endpoint import route

router = APIRouter(tags=["cognitive"])
Rows = Annotated[int, Query(ge=1, le=t.MAX_ROWS)]
A = "/v1/agents/{agent}"


@route(router, "POST", f"{A}/recall", body=t.RecallRequest, response=t.RecallResponse,
       errors=("invalid_id", "bad_query", "bad_settings"), reads="recall")
def recall(api: ScopedApi, agent: str, body: t.RecallRequest) -> t.RecallResponse:
    """The agent's memory traces for a query, ranked by the six-factor composite, with the breakdown and sources."""
    return api.recall(agent, body)


@route(router, "GET", f"{A}/traces", response=t.Table, errors=("invalid_id",), reads="traces")
def traces(api: ScopedApi, agent: str, all: bool = False, limit: Rows | None = None) -> t.Table:
    """The agent's memory traces, oldest first (`all`: soft-deleted ones too)."""
    return api.traces(agent, include_inactive=all, limit=limit)


@route(router, "GET", f"{A}/working-memory", response=t.WorkingMemoryResponse, errors=("invalid_id",),
       reads="working_memory")
def working_memory(api: ScopedApi, agent: str) -> t.WorkingMemoryResponse:
    """The slots in focus and working-memory.md."""
    return api.working_memory(agent)


@route(router, "PUT", f"{A}/working-memory", body=t.WorkingMemoryWrite, response=t.WorkingMemoryWritten,
       errors=("invalid_id", "bad_settings"))
def write_working_memory(api: ScopedApi, agent: str, body: t.WorkingMemoryWrite) -> t.WorkingMemoryWritten:
    """Replace the agent's persistent markdown notes (cut to their budget)."""
    return api.write_working_memory(agent, body)


@route(router, "GET", f"{A}/mood", response=t.Table, errors=("invalid_id",), reads="mood")
def mood(api: ScopedApi, agent: str) -> t.Table:
    """The agent's mood history (MoodChanged events)."""
    return api.mood_history(agent)


@route(router, "PUT", f"{A}/mood", body=t.MoodRequest, response=t.EventResponse, errors=("invalid_id", "bad_settings"))
def set_mood(api: ScopedApi, agent: str, body: t.MoodRequest) -> t.EventResponse:
    """Record a new mood (valence, arousal, dominance, each in [-1, 1])."""
    return api.set_mood(agent, body)


@route(router, "GET", f"{A}/observations", response=t.Table, errors=("invalid_id",), reads="observations")
def observations(api: ScopedApi, agent: str) -> t.Table:
    """One row per observation log of the agent."""
    return api.observation_logs(agent)


@route(router, "GET", f"{A}/discussions/{{discussion}}/observations", response=t.ObservationLogResponse,
       errors=("invalid_id",), reads="observations")
def observation_log(api: ScopedApi, agent: str, discussion: str) -> t.ObservationLogResponse:
    """A discussion's observation log as rendered markdown."""
    return api.observation_log(agent, discussion)


@route(router, "GET", f"{A}/discussions/{{discussion}}/observation-notes", response=t.Table, errors=("invalid_id",),
       reads="observations")
def observation_notes(api: ScopedApi, agent: str, discussion: str) -> t.Table:
    """Every observation note of a discussion, with its status."""
    return api.observation_notes(agent, discussion)


@route(router, "GET", f"{A}/discussions/{{discussion}}/recent-observations", response=t.RecentObservations,
       errors=("invalid_id",), reads="observations")
def recent_observations(api: ScopedApi, agent: str, discussion: str, limit: Rows = 10) -> t.RecentObservations:
    """The Observer's latest notes for a discussion, rendered as its observation log renders them."""
    return api.recent_observations(agent, discussion, limit=limit)


@route(router, "GET", f"{A}/consolidations", response=t.ConsolidationsResponse, errors=("invalid_id",), reads="traces")
def consolidations(api: ScopedApi, agent: str, all: bool = False, limit: Rows = 50) -> t.ConsolidationsResponse:
    """What each consolidation run did (`all`: idle runs too), and totals."""
    return api.consolidations(agent, include_idle=all, limit=limit)


@route(router, "DELETE", A, response=t.Job, status=202, errors=("invalid_id",))
def forget_agent(api: ScopedApi, agent: str, reason: str = "") -> t.Job:
    """Start a job erasing everything of the agent: projections and log payloads (cannot be undone)."""
    return api.forget(agent, None, t.ForgetRequest(reason=reason))

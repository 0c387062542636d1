"""The home as a whole: health, status, SQL, jobs (replay, verify), shutdown."""

from __future__ import annotations

from fastapi import APIRouter

from engram.api import types as t
from engram.server.endpoint import route

router = APIRouter(tags=["system"])


@route(router, "GET", "/v1/health", response=t.Health)
def health(server):
    """This server: the home it serves, its instance token and pid (how commands recognise it)."""
    return server.health


@route(router, "GET", "/v1/status", response=t.StatusResponse)
def status(api):
    """Log head per shard, every projection's and policy's position and lag, errors, event counts by type."""
    return api.status()


@route(router, "POST", "/v1/sql", body=t.SqlRequest, response=t.SqlResponse, errors=("bad_query",))
def sql(api, body: t.SqlRequest):
    """Read-only SQL over the log (events, ev_<type>, messages) and every projection table and file."""
    return api.run_sql(body)


@route(router, "POST", "/v1/replay", body=t.ReplayRequest, response=t.Job, status=202,
       errors=("conflict", "invalid_id"))
def replay(api, body: t.ReplayRequest):
    """Start a replay job: rebuild the projections in place, into a fresh directory (as of a position or a
    time), or into scratch space to compare with the live ones (verify). No LLM call."""
    return api.replay(body)


@route(router, "GET", "/v1/jobs", response=t.JobList)
def jobs(api):
    """The jobs of this server (running and recently finished)."""
    return api.job_list()


@route(router, "GET", "/v1/jobs/{job_id}", response=t.Job, errors=("invalid_id", "unknown_job"))
def job(api, job_id: str):
    """A job's state, progress and result (or error)."""
    return api.job(job_id)


@route(router, "GET", "/v1/discussions/{discussion}", response=t.DiscussionResponse,
       errors=("invalid_id", "unknown_discussion"))
def discussion(api, discussion: str):
    """The agent a discussion belongs to."""
    return api.discussion(discussion)


@route(router, "POST", "/v1/shutdown", response=None, status=202)
def shutdown(server):
    """Stop this server (what `engram down` asks): it finishes the requests in flight and closes the home cleanly."""
    server.shutdown()
    return {"stopping": True}

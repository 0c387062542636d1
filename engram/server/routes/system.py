"""The home as a whole: health, status, SQL, jobs (replay, verify), shutdown."""

from __future__ import annotations

from fastapi import APIRouter

from engram.api import types as t
from engram.api.errors import error
from engram.server.endpoint import route

router = APIRouter(tags=["system"])


@route(router, "GET", "/v1/health", response=t.Health, access="open")
def health(server):
    """This server: the home it serves, its instance token and pid (how commands recognise it)."""
    return server.health


@route(router, "GET", "/v1/status", response=t.StatusResponse)
def status(api):
    """Log head per shard, every projection's and policy's position and lag, errors, event counts by type."""
    return api.status()


@route(router, "POST", "/v1/sql", body=t.SqlRequest, response=t.SqlResponse, errors=("bad_query", "forbidden"),
       access="key")
def sql(api, body: t.SqlRequest, principal):
    """Read-only SQL over the log (events, ev_<type>, messages) and every projection table and file; with a key
    limited to agents, over those agents' rows only."""
    return api.run_sql(body, agents=None if principal.admin else sorted(principal.agents))


@route(router, "POST", "/v1/replay", body=t.ReplayRequest, response=t.Job, status=202,
       errors=("conflict", "invalid_id", "forbidden", "unknown_agent"), access="key")
def replay(api, body: t.ReplayRequest, principal):
    """Start a replay job: rebuild the projections in place, into a fresh directory (as of a position or a
    time), or into scratch space to compare with the live ones (verify). No LLM call. A key limited to agents
    replays one of its agents (`agent`)."""
    if body.agent is None:
        principal.require_admin("a replay of every shard")
    else:
        principal.require(body.agent)
    return api.replay(body)


def _may_follow(server, principal, job_id: str) -> bool:
    if principal.admin:
        return True
    if job_id in server.job_agents:
        owner = server.job_agents[job_id]
    else:  # started through another replica of this server
        known, owner = server.api.jobs.followers(job_id)
        if not known:
            return False
    return owner is not None and owner <= principal.agents


@route(router, "GET", "/v1/jobs", response=t.JobList, access="key")
def jobs(server, principal):
    """The jobs of this server (running and recently finished); a key limited to agents sees the jobs it started."""
    listed = server.api.job_list()
    return t.JobList(jobs=[j for j in listed.jobs if _may_follow(server, principal, j.id)])


@route(router, "GET", "/v1/jobs/{job_id}", response=t.Job, errors=("invalid_id", "unknown_job"), access="key")
def job(server, job_id: str, principal):
    """A job's state, progress and result (or error)."""
    found = server.api.job(job_id)
    if not _may_follow(server, principal, job_id):
        raise error("unknown_job", f"no job {job_id!r} of this key")
    return found


@route(router, "GET", "/v1/discussions/{discussion}", response=t.DiscussionResponse,
       errors=("invalid_id", "unknown_discussion"), access="key")
def discussion(api, discussion: str, principal):
    """The agent a discussion belongs to."""
    found = api.discussion(discussion)
    if not principal.may(found.agent):
        raise error("unknown_discussion", f"discussion {discussion!r} has no events for this key's agents")
    return found


@route(router, "POST", "/v1/shutdown", response=None, status=202)
def shutdown(server):
    """Stop this server (what `engram down` asks): it finishes the requests in flight and closes the home cleanly."""
    server.shutdown()
    return {"stopping": True}

"""The home as a whole: health, status, SQL, jobs (replay, verify), shutdown."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.datastructures import State

from engram.api import types as t
from engram.api.access import ScopedApi
from engram.api.errors import error
from engram.server.endpoint import route

router = APIRouter(tags=["system"])


@route(router, "GET", "/v1/health", response=t.Health, access="open")
def health(server: State) -> t.Health:
    """The server is up (nothing else: no key is needed, so nothing here may tell more)."""
    return t.Health()


@route(router, "GET", "/v1/instance", response=t.InstanceProof, access="open")
def instance(server: State, challenge: str) -> t.InstanceProof:
    """This server's proof that it is the home's: HMAC-SHA256, keyed with its instance token, of the home and the
    caller's `challenge` (16 to 128 hex digits). A command that read the home's instance.json computes the same;
    nobody else can."""
    from engram.server.instance import proof

    if not 16 <= len(challenge) <= 128 or any(c not in "0123456789abcdef" for c in challenge):
        raise error("invalid_request", "challenge must be 16 to 128 lower-case hex digits")

    return t.InstanceProof(proof=proof(server.identity.token, server.identity.home, challenge))


@route(router, "GET", "/v1/server", response=t.ServerInfo)
def server_info(server: State) -> t.ServerInfo:
    """Which home this server serves, its pid, version and runtime (a key for every agent)."""
    who = server.identity
    return t.ServerInfo(home=who.home, pid=who.pid, version=who.version, runtime=who.runtime)


@route(router, "GET", "/v1/status", response=t.StatusResponse)
def status(api: ScopedApi) -> t.StatusResponse:
    """Log head per shard, every projection's and policy's position and lag, errors, event counts by type."""
    return api.status()


@route(router, "POST", "/v1/llm/check", response=t.LlmCheckResponse)
def llm_check(api: ScopedApi) -> t.LlmCheckResponse:
    """Call each configured LLM endpoint once and say, per endpoint, the model it answered as, the latency, how JSON
    answers work there and the context window, or one line saying what to fix (a wrong URL, a missing model, a bad
    key). A key for every agent: it names the home's endpoints. Keys are never in the answer."""
    return api.llm_check()


@route(router, "POST", "/v1/sql", body=t.SqlRequest, response=t.SqlResponse, errors=("bad_query", "forbidden"),
       access="key")
def sql(api: ScopedApi, body: t.SqlRequest) -> t.SqlResponse:
    """Read-only SQL over the log (events, ev_<type>, messages) and every projection table and file; with a key
    limited to agents, over those agents' rows only."""
    return api.run_sql(body)


@route(router, "POST", "/v1/replay", body=t.ReplayRequest, response=t.Job, status=202,
       errors=("conflict", "invalid_id", "unknown_agent"))
def replay(api: ScopedApi, body: t.ReplayRequest) -> t.Job:
    """Start a replay job: rebuild the projections in place, into a fresh directory under the home's `exports/` (or
    `server.exportRoot`) as of a position or a time, or into scratch space to compare with the live ones (verify).
    No LLM call. Whole shards, with every agent on them: a key for every agent (a key limited to agents rebuilds
    its discussions' files with their own replay)."""
    return api.replay(body)


@route(router, "GET", "/v1/jobs", response=t.JobList, access="key")
def jobs(api: ScopedApi) -> t.JobList:
    """The jobs of this server (running and recently finished); a key limited to agents sees the jobs it started."""
    return api.job_list()


@route(router, "GET", "/v1/jobs/{job_id}", response=t.Job, errors=("invalid_id", "unknown_job"), access="key")
def job(api: ScopedApi, job_id: str) -> t.Job:
    """A job's state, progress and result (or error)."""
    return api.job(job_id)


@route(router, "GET", "/v1/discussions/{discussion}", response=t.DiscussionResponse,
       errors=("invalid_id", "unknown_discussion", "ambiguous_discussion"), access="key")
def discussion(api: ScopedApi, discussion: str) -> t.DiscussionResponse:
    """The agent a discussion belongs to, among the agents the key may see. A discussion id is unique within its agent
    only: when several of those agents have a discussion of this id, 409 `ambiguous_discussion` (naming none of them);
    the agent's own routes (`/v1/agents/{agent}/discussions/{discussion}/…`) name it."""
    return api.discussion(discussion)


@route(router, "POST", "/v1/shutdown", response=None, status=202)
def shutdown(server: State) -> dict[str, bool]:
    """Stop this server (what `engram down` asks): it finishes the requests in flight and closes the home cleanly."""
    server.shutdown()
    return {"stopping": True}

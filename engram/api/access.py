"""Who may see what of a home: the `Principal` of a request, and `ScopedApi`, the API as one principal sees it.

Every interface (REST, the OpenAI proxy, MCP, the inspector, jobs) calls the API through a `ScopedApi` made for the
request's principal, so the rule is kept in one place: **a key's view of the home is exactly its agents.**

- An operation with an `agent` parameter runs only for an agent the principal may touch; any other agent is answered
  as an agent that does not exist (`unknown_agent`, the same message), whether it exists or not.
- Operations without an agent are scoped here by name (`SCOPED`): SQL sees the principal's agents' rows only; a
  discussion, a job, the list of agents show only what is the principal's.
- Every other operation concerns the whole home and needs a principal for every agent (403 `forbidden`): a new
  operation is therefore closed to a scoped key until it is said here how it is scoped.

The operations themselves check that a discussion they are given is the named agent's (`Api.discussion_agent`,
`Api.claim_discussion`), and no refusal names another agent (`engram.api.errors.unknown_agent` and friends).
A discussion id is unique within its agent only: a route given only a discussion id resolves it among the key's own
agents (`_visible_owner`), so another agent's discussion of the same id is never seen, named or hinted at.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from engram.api import types as t
from engram.api.errors import ApiError, ambiguous_discussion, error, unknown_agent, unknown_discussion
from engram.runtime.base import Row

if TYPE_CHECKING:
    from engram.api.service import Api

    # To the type checker a ScopedApi is an Api: it offers every operation of the Api (scoped to the principal's
    # agents, or refused), through `__getattr__` or as its own method below.
    _Operations = Api
else:
    _Operations = object


@dataclass(frozen=True)
class Principal:
    """Who asks: a name for logs, and the agents it may touch (None: every agent, an admin)."""

    name: str
    agents: frozenset[str] | None = None

    @property
    def admin(self) -> bool:
        return self.agents is None

    def may(self, agent: str) -> bool:
        return self.agents is None or agent in self.agents

    def require(self, agent: str) -> None:
        if not self.may(agent):
            # The same answer as for an agent that does not exist: a key learns nothing about others' agents.
            raise unknown_agent(agent)

    def require_admin(self, what: str) -> None:
        if not self.admin:
            raise error("forbidden", f"{what} concerns the whole home: it needs a key for every agent "
                        "(engram keys add --agents '*'); this key may touch only its agents")


EVERYONE = Principal("the home's owner")

# Operations without an `agent` parameter that a scoped key may call: each is a method of ScopedApi below.
SCOPED = ("run_sql", "read_sql", "discussion", "known_agents", "list_agents", "job", "job_list", "wait_job", "replay")
# Attributes that are not operations, readable by any principal (the inspector reads settings and paths).
PLAIN = ("config", "home")


class ScopedApi(_Operations):
    """`Api` as `principal` sees the home (see the module docstring). `api.scoped(principal)` makes one."""

    def __init__(self, api: Api, principal: Principal) -> None:
        self._api, self.principal = api, principal
        self._checked: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:  # any operation of the Api, scoped (a proxy: its type is the Api's)
        if name in PLAIN:
            return getattr(self._api, name)
        if name.startswith("_"):
            raise AttributeError(name)
        op = getattr(self._api, name)
        if not callable(op):
            raise AttributeError(f"{name} is not an operation of the API")
        if "agent" not in inspect.signature(op).parameters:
            self.principal.require_admin(name.replace("_", " "))
            return op
        return self._agent_op(name, op)

    def _agent_op(self, name: str, op: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(op)

        def scoped(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            agent = bound.arguments.get("agent")
            if agent is not None:
                self.principal.require(agent)
            elif not self.principal.admin:  # an operation that finds the agent itself (regenerate by discussion)
                discussion = bound.arguments.get("discussion")
                if discussion is None:
                    self.principal.require_admin(name.replace("_", " "))  # refused: not an admin
                else:
                    owner = self._visible_owner(discussion)
                    self.principal.require(owner)
                    bound.arguments["agent"] = owner  # the operation resolves the discussion among this key's agents
                    args, kwargs = bound.args, bound.kwargs
            try:
                result = op(*args, **kwargs)
            except ApiError as exc:
                raise self._hinted(exc) from None
            return self.started(result) if isinstance(result, t.Job) else result

        scoped.__name__ = name
        return scoped

    def _visible_owner(self, discussion: str) -> str:
        """The agent of `discussion` if the principal may see it; else the discussion is unknown, as one without events."""
        try:
            owners = [a for a in self._api.discussion_owners(discussion) if self.principal.may(a)]
        except ApiError:
            raise unknown_discussion(discussion) from None
        if not owners:  # none, or only agents this key may not see: the same refusal
            raise unknown_discussion(discussion)
        if len(owners) > 1:
            raise ambiguous_discussion(discussion)
        return owners[0]

    def require_agent(self, agent: str) -> str:
        """`agent`, if the principal may touch it and the home knows it (the one refusal for both)."""
        self.principal.require(agent)
        try:
            return self._api.require_agent(agent)
        except ApiError as exc:
            raise self._hinted(exc) from None

    def _hinted(self, exc: ApiError) -> ApiError:
        """A mistyped agent, to a principal that sees every agent: the refusal lists them (a scoped key's never does)."""
        if exc.code != "unknown_agent" or not self.principal.admin:
            return exc
        known = sorted(self._api.known_agents())
        hint = f"; the agents are: {', '.join(known[:20])}" if known else "; the home has no agents yet"
        return ApiError(exc.status, exc.code, exc.message + hint, exc.retry_after)

    # ------------------------------------------------------------------ the operations scoped here (SCOPED)

    def run_sql(self, req: t.SqlRequest) -> t.SqlResponse:  # type: ignore[override]  # no caller widens a key's agents
        agents = self.principal.agents  # None: an admin's
        return self._api.run_sql(req, agents=None if agents is None else sorted(agents))

    def read_sql(self, query: str, params: list[Any] | None = None) -> tuple[list[str], list[Row]]:
        """engram's own SQL for the inspector's views: fixed queries, each filtered by the agent the view names, which
        the inspector has passed through `require_agent` first. Not a user's SQL (that is `run_sql`, confined)."""
        return self._api.read_sql(query, params)

    def discussion(self, discussion: str) -> t.DiscussionResponse:
        return t.DiscussionResponse(discussion=discussion, agent=self._visible_owner(discussion))

    def known_agents(self) -> set[str]:
        return {a for a in self._api.known_agents() if self.principal.may(a)}

    def list_agents(self) -> t.AgentList:  # type: ignore[override]  # no caller widens a key's agents
        """The principal's agents only (an admin's: every agent); another key's agent is never named."""
        agents = self.principal.agents  # None: an admin's
        return self._api.list_agents(None if agents is None else sorted(agents))

    def job_list(self) -> t.JobList:
        return t.JobList(jobs=[j for j in self._api.job_list().jobs if self._may_follow(j.id)])

    def job(self, job_id: str) -> t.Job:
        found = self._api.job(job_id)
        if not self._may_follow(job_id):
            raise error("unknown_job", f"no job {job_id!r} on this server (jobs live as long as the server)")
        return found

    def wait_job(self, job_id: str, timeout: float | None = None) -> t.Job:
        self.job(job_id)
        return self._api.jobs.wait(job_id, timeout)

    def replay(self, req: t.ReplayRequest) -> t.Job:
        """A replay rebuilds or writes whole shards, which hold other agents too: an admin's. A scoped key rebuilds
        its own discussions' files instead (`replay_discussion`)."""
        self.principal.require_admin("a replay (it rebuilds or writes whole shards, with every agent on them)")
        return self._api.replay(req)

    def _may_follow(self, job_id: str) -> bool:
        """Whether the principal started the job (or may touch every agent the starter could)."""
        if self.principal.admin:
            return True
        known, owner = self._api.jobs.followers(job_id)
        agents = self.principal.agents
        return known and owner is not None and agents is not None and owner <= agents

    def started(self, job: t.Job) -> t.Job:
        """Record that the principal started `job`: who may follow it (on every replica of the server)."""
        self._api.jobs.follow(job.id, self.principal.agents)
        return job

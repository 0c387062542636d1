"""Who may touch which agents: the per-request hook of every agent-scoped route.

Today no API key is configured: the server listens on loopback only and every request may touch
every agent of the home. API keys (each mapped to its agents, stored hashed) plug in here:
`authenticate` reads the request's key, `Principal.require(agent)` refuses the agents it may not see.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.api.errors import ApiError


@dataclass(frozen=True)
class Principal:
    name: str
    agents: frozenset[str] | None = None  # None: every agent

    def may(self, agent: str) -> bool:
        return self.agents is None or agent in self.agents

    def require(self, agent: str) -> None:
        if not self.may(agent):
            # The same answer as for an agent that does not exist: a key learns nothing about others' agents.
            raise ApiError(404, "unknown_agent", f"agent {agent!r} is not known to this key")


LOOPBACK = Principal("loopback")


def authenticate(request) -> Principal:
    """The principal of a request (no keys configured: the loopback user, who may touch every agent)."""
    return LOOPBACK

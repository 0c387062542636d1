"""What the MCP tools call: the API in the server's process (scoped by the request's key), or `engram.Client`
(`engram mcp` over stdio, a client of the home's server). Both return the API's types."""

from __future__ import annotations

import msgspec

from engram.api import types as t
from engram.api.errors import error

FORGET_WAIT_S = 600.0


def request(cls: type, **fields):
    """A request built as REST decodes one: every bound of its declaration checked (a Struct's constructor checks
    none), a violation refused as invalid_request."""
    try:
        return msgspec.convert(fields, cls)
    except msgspec.ValidationError as exc:
        raise error("invalid_request", f"{cls.__name__}: {exc}") from None


class ApiBackend:
    """The API of the server serving `/mcp`, as the request's key sees the home (`engram.api.access.ScopedApi`)."""

    def __init__(self, api, principal):
        self.api, self.principal = api.scoped(principal), principal

    def remember(self, agent: str, discussion: str, role: str, content: str) -> t.AppendResponse:
        return self.api.append_messages(agent, discussion,
                                        t.AppendRequest(messages=[t.Message(role=role, content=content)]))

    def recall(self, agent: str, query: str, discussion: str | None, limit: int,
               as_of: str | None = None) -> t.RecallResponse:
        return self.api.recall(agent, request(t.RecallRequest, query=query, discussion=discussion, limit=limit,
                                              sources=False, **({"as_of": as_of} if as_of else {})))

    def search(self, agent: str, discussion: str, keywords: str, mode: str, limit: int) -> t.SearchResponse:
        return self.api.search(agent, discussion, request(t.SearchRequest, keywords=keywords, mode=mode, limit=limit))

    def working_memory(self, agent: str) -> t.WorkingMemoryResponse:
        return self.api.working_memory(agent)

    def write_working_memory(self, agent: str, markdown: str) -> t.WorkingMemoryWritten:
        return self.api.write_working_memory(agent, t.WorkingMemoryWrite(markdown=markdown))

    def forget(self, agent: str, discussion: str | None, reason: str) -> t.Job:
        job = self.api.forget(agent, discussion, t.ForgetRequest(reason=reason))
        return self.api.wait_job(job.id, FORGET_WAIT_S)

    def summary(self, agent: str, discussion: str) -> t.SummaryResponse:
        return self.api.summary(agent, discussion)

    def memories(self, agent: str, discussion: str) -> t.MemoriesResponse:
        return self.api.memories(agent, discussion)


class ClientBackend:
    """`engram.Client` of the home's server (its key: $ENGRAM_API_KEY, else the server's instance token)."""

    def __init__(self, connect):
        self._connect, self._client = connect, None

    @property
    def client(self):
        if self._client is None:  # the server is found (or started) at the first call, not at the MCP handshake
            self._client = self._connect()
        return self._client

    def remember(self, agent, discussion, role, content):
        return self.client.append_messages(agent, discussion, [t.Message(role=role, content=content)])

    def recall(self, agent, query, discussion, limit, as_of=None):
        at = request(t.RecallRequest, query=query, as_of=as_of).as_of if as_of else None  # checked as REST checks it
        return self.client.recall(agent, query, discussion=discussion, limit=limit, sources=False,
                                  **({"as_of": at} if at is not None else {}))

    def search(self, agent, discussion, keywords, mode, limit):
        return self.client.search(agent, discussion, keywords, mode=mode, limit=limit)

    def working_memory(self, agent):
        return self.client.working_memory(agent)

    def write_working_memory(self, agent, markdown):
        return self.client.write_working_memory(agent, markdown)

    def forget(self, agent, discussion, reason):
        job = self.client.forget(agent, discussion, reason=reason)
        return self.client.wait_job(job.id, timeout=FORGET_WAIT_S)

    def summary(self, agent, discussion):
        return self.client.summary(agent, discussion)

    def memories(self, agent, discussion):
        return self.client.memories(agent, discussion)

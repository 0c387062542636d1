"""What the MCP tools call: the API in the server's process (scoped by the request's key), or `engram.Client`
(`engram mcp` over stdio, a client of the home's server). Both return the API's types."""

from __future__ import annotations

import threading
from collections import OrderedDict

import msgspec

from engram.api import positions
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


class Session:
    """Read your writes over MCP: the furthest position of the writes made in one session (`engram.api.positions`);
    the session's reads wait for it. Over `/mcp` (stateless HTTP: no session id) a session is an API key."""

    def __init__(self):
        self.position = ""
        self._lock = threading.Lock()

    def wrote(self, result):
        written = getattr(result, "position", None)
        if written:
            with self._lock:
                self.position = positions.merge(self.position, written)
        return result


class Sessions:
    """The sessions of `/mcp`, one per principal; the least recently used are let go beyond `capacity` (a session
    let go reads without waiting, as any other caller)."""

    def __init__(self, capacity: int = 10_000):
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self.capacity = capacity

    def of(self, principal) -> Session:
        with self._lock:
            session = self._sessions.pop(principal.name, None) or Session()
            self._sessions[principal.name] = session
            while len(self._sessions) > self.capacity:
                self._sessions.popitem(last=False)
            return session


class ApiBackend:
    """The API of the server serving `/mcp`, as the request's key sees the home (`engram.api.access.ScopedApi`).
    Reads wait for the writes of `session` (`remember`, then `recall`, finds the memory)."""

    def __init__(self, api, principal, session: Session | None = None):
        self.api, self.principal = api.scoped(principal), principal
        self.session = session or Session()

    def _after(self, agent: str, read: str, discussion: str | None = None) -> None:
        if self.session.position:
            self.api.reach(agent, self.session.position, read, discussion)

    def remember(self, agent: str, discussion: str, role: str, content: str) -> t.AppendResponse:
        return self.session.wrote(self.api.append_messages(
            agent, discussion, t.AppendRequest(messages=[t.Message(role=role, content=content)])))

    def recall(self, agent: str, query: str, discussion: str | None, limit: int) -> t.RecallResponse:
        req = request(t.RecallRequest, query=query, discussion=discussion, limit=limit, sources=False)
        self._after(agent, "recall")
        return self.api.recall(agent, req)

    def search(self, agent: str, discussion: str, keywords: str, mode: str, limit: int) -> t.SearchResponse:
        req = request(t.SearchRequest, keywords=keywords, mode=mode, limit=limit)
        self._after(agent, "discussion", discussion)
        return self.api.search(agent, discussion, req)

    def working_memory(self, agent: str) -> t.WorkingMemoryResponse:
        self._after(agent, "working_memory")
        return self.api.working_memory(agent)

    def write_working_memory(self, agent: str, markdown: str) -> t.WorkingMemoryWritten:
        return self.session.wrote(self.api.write_working_memory(agent, t.WorkingMemoryWrite(markdown=markdown)))

    def forget(self, agent: str, discussion: str | None, reason: str) -> t.Job:
        job = self.api.forget(agent, discussion, t.ForgetRequest(reason=reason))
        return self.api.wait_job(job.id, FORGET_WAIT_S)

    def summary(self, agent: str, discussion: str) -> t.SummaryResponse:
        self._after(agent, "discussion", discussion)
        return self.api.summary(agent, discussion)

    def memories(self, agent: str, discussion: str) -> t.MemoriesResponse:
        self._after(agent, "discussion", discussion)
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

    def recall(self, agent, query, discussion, limit):
        return self.client.recall(agent, query, discussion=discussion, limit=limit, sources=False)

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

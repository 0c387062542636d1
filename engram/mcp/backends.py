"""What the MCP tools call: the API in the server's process (scoped by the request's key), or `engram.Client`
(`engram mcp` over stdio, a client of the home's server). Both return the API's types."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Literal, TypeVar

import msgspec

from engram.api import positions
from engram.api import types as t
from engram.api.errors import error

if TYPE_CHECKING:
    from engram.api.access import Principal
    from engram.api.service import Api
    from engram.client import Client

R = TypeVar("R")

FORGET_WAIT_S = 600.0
# Resources `resources/list` names at most (an agent's discussions, each with its summary and chunk memories).
MAX_LISTED_RESOURCES = 500


def listed_resources(backend: ApiBackend | ClientBackend) -> list[dict[str, str]]:
    """What `resources/list` shows a session: for every agent it may see, the list of its discussions, its memory
    traces, and each discussion's rolling summary and chunk memories (the first MAX_LISTED_RESOURCES)."""
    out = []
    for agent in backend.list_agents().agents:
        base = f"engram://agents/{agent.agent}"
        out.append({"uri": f"{base}/discussions", "name": f"{agent.agent}: discussions",
                    "description": f"The discussions of agent {agent.agent} ({agent.discussions})."})
        out.append({"uri": f"{base}/memories", "name": f"{agent.agent}: memory traces",
                    "description": f"The memory traces of agent {agent.agent} ({agent.traces}), oldest first."})
        cursor = None
        while len(out) < MAX_LISTED_RESOURCES:
            page = backend.list_discussions(agent.agent, cursor)
            for d in page.discussions:
                out.append({"uri": f"{base}/discussions/{d.discussion}/summary", "name": f"{d.discussion}: summary",
                            "description": f"The rolling summary of discussion {d.discussion} of {agent.agent}."})
                out.append({"uri": f"{base}/discussions/{d.discussion}/memories", "name": f"{d.discussion}: memories",
                            "description": f"The chunk memories of discussion {d.discussion} of {agent.agent}."})
            cursor = page.next_cursor
            if cursor is None:
                break
    return out[:MAX_LISTED_RESOURCES]


def request(cls: type[R], **fields: Any) -> R:
    """A request built as REST decodes one: every bound of its declaration checked (a Struct's constructor checks
    none), a violation refused as invalid_request."""
    try:
        return msgspec.convert(fields, cls)
    except msgspec.ValidationError as exc:
        raise error("invalid_request", f"{cls.__name__}: {exc}") from None


class Session:
    """Read your writes over MCP: the furthest position of the writes made in one session (`engram.api.positions`);
    the session's reads wait for it. Over `/mcp` (stateless HTTP: no session id) a session is an API key."""

    def __init__(self) -> None:
        self.position = ""
        self._lock = threading.Lock()

    def wrote(self, result: R) -> R:
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

    def of(self, principal: Principal) -> Session:
        with self._lock:
            session = self._sessions.pop(principal.name, None) or Session()
            self._sessions[principal.name] = session
            while len(self._sessions) > self.capacity:
                self._sessions.popitem(last=False)
            return session


class ApiBackend:
    """The API of the server serving `/mcp`, as the request's key sees the home (`engram.api.access.ScopedApi`).
    Reads wait for the writes of `session` (`remember`, then `recall`, finds the memory)."""

    def __init__(self, api: Api, principal: Principal, session: Session | None = None) -> None:
        self.api, self.principal = api.scoped(principal), principal
        self.session = session or Session()

    def _after(self, agent: str, read: str, discussion: str | None = None) -> None:
        if self.session.position:
            self.api.reach(agent, self.session.position, read, discussion)

    def remember(self, agent: str, discussion: str, role: t.Role, content: str) -> t.AppendResponse:
        return self.session.wrote(self.api.append_messages(
            agent, discussion, t.AppendRequest(messages=[t.Message(role=role, content=content)])))

    def recall(self, agent: str, query: str, discussion: str | None, limit: int,
               as_of: str | None = None) -> t.RecallResponse:
        req = request(t.RecallRequest, query=query, discussion=discussion, limit=limit, sources=False,
                      **({"as_of": as_of} if as_of else {}))
        self._after(agent, "recall")
        return self.api.recall(agent, req)

    def search(self, agent: str, discussion: str, keywords: str, mode: t.SearchMode, limit: int) -> t.SearchResponse:
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

    def list_agents(self) -> t.AgentList:
        return self.api.list_agents()

    def list_discussions(self, agent: str, cursor: str | None = None) -> t.DiscussionList:
        self._after(agent, "log")
        return self.api.list_discussions(agent, cursor=cursor)

    def list_memories(self, agent: str, cursor: str | None = None) -> t.MemoryPage:
        self._after(agent, "memories")
        return self.api.list_memories(agent, "traces", cursor=cursor)

    def resources(self) -> list[dict[str, str]]:
        return listed_resources(self)

    def edit_memory(self, agent: str, kind: Literal["trace", "fact"], memory_id: str, content: str | None,
                    metadata: dict[str, str] | None) -> t.MemoryEdited:
        return self.api.edit_memory(agent, kind, memory_id, request(t.MemoryEdit, content=content, metadata=metadata))

    def edit_message(self, agent: str, discussion: str, message_id: str, content: str) -> t.MessageChanged:
        return self.session.wrote(self.api.edit_message(agent, discussion, message_id,
                                                        request(t.MessageEdit, content=content)))

    def remove_message(self, agent: str, discussion: str, message_id: str, reason: str) -> t.MessageChanged:
        return self.session.wrote(self.api.remove_message(agent, discussion, message_id, reason))

    def delete_memory(self, agent: str, kind: Literal["trace", "fact"], memory_id: str, reason: str) -> t.Job:
        job = self.api.delete_memory(agent, kind, memory_id, t.ForgetRequest(reason=reason))
        return self.api.wait_job(job.id, FORGET_WAIT_S)

    def summary(self, agent: str, discussion: str) -> t.SummaryResponse:
        self._after(agent, "discussion", discussion)
        return self.api.summary(agent, discussion)

    def memories(self, agent: str, discussion: str) -> t.MemoriesResponse:
        self._after(agent, "discussion", discussion)
        return self.api.memories(agent, discussion)


class ClientBackend:
    """`engram.Client` of the home's server (its key: $ENGRAM_API_KEY, else the server's instance token)."""

    def __init__(self, connect: Callable[[], Client]) -> None:
        self._connect: Callable[[], Client] = connect
        self._client: Client | None = None

    @property
    def client(self) -> Client:
        if self._client is None:  # the server is found (or started) at the first call, not at the MCP handshake
            self._client = self._connect()
        return self._client

    def remember(self, agent: str, discussion: str, role: t.Role, content: str) -> t.AppendResponse:
        return self.client.append_messages(agent, discussion, [t.Message(role=role, content=content)])

    def recall(self, agent: str, query: str, discussion: str | None, limit: int,
               as_of: str | None = None) -> t.RecallResponse:
        at = request(t.RecallRequest, query=query, as_of=as_of).as_of if as_of else None  # checked as REST checks it
        return self.client.recall(agent, query, discussion=discussion, limit=limit, sources=False,
                                  **({"as_of": at} if at is not None else {}))

    def search(self, agent: str, discussion: str, keywords: str, mode: t.SearchMode, limit: int) -> t.SearchResponse:
        return self.client.search(agent, discussion, keywords, mode=mode, limit=limit)

    def working_memory(self, agent: str) -> t.WorkingMemoryResponse:
        return self.client.working_memory(agent)

    def write_working_memory(self, agent: str, markdown: str) -> t.WorkingMemoryWritten:
        return self.client.write_working_memory(agent, markdown)

    def forget(self, agent: str, discussion: str | None, reason: str) -> t.Job:
        job = self.client.forget(agent, discussion, reason=reason)
        return self.client.wait_job(job.id, timeout=FORGET_WAIT_S)

    def list_agents(self) -> t.AgentList:
        return self.client.list_agents()

    def list_discussions(self, agent: str, cursor: str | None = None) -> t.DiscussionList:
        return self.client.list_discussions(agent, cursor=cursor)

    def list_memories(self, agent: str, cursor: str | None = None) -> t.MemoryPage:
        return self.client.list_memories(agent, "traces", cursor=cursor)

    def resources(self) -> list[dict[str, str]]:
        return listed_resources(self)

    def edit_memory(self, agent: str, kind: Literal["trace", "fact"], memory_id: str, content: str | None,
                    metadata: dict[str, str] | None) -> t.MemoryEdited:
        return self.client.edit_memory(agent, kind, memory_id, content=content, metadata=metadata)

    def edit_message(self, agent: str, discussion: str, message_id: str, content: str) -> t.MessageChanged:
        return self.client.edit_message(agent, discussion, message_id, content)

    def remove_message(self, agent: str, discussion: str, message_id: str, reason: str) -> t.MessageChanged:
        return self.client.remove_message(agent, discussion, message_id, reason=reason)

    def delete_memory(self, agent: str, kind: Literal["trace", "fact"], memory_id: str, reason: str) -> t.Job:
        job = self.client.delete_memory(agent, kind, memory_id, reason=reason)
        return self.client.wait_job(job.id, timeout=FORGET_WAIT_S)

    def summary(self, agent: str, discussion: str) -> t.SummaryResponse:
        return self.client.summary(agent, discussion)

    def memories(self, agent: str, discussion: str) -> t.MemoriesResponse:
        return self.client.memories(agent, discussion)

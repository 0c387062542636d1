"""`engram.Client` and `engram.AsyncClient`: the API over HTTP, returning the API's types.

    from engram import Client
    from engram.api.types import Message

    with Client.for_home("~/.engram") as mem:                # the home's server (started if none runs)
        mem.append_messages("my-agent", "trip-2024", [Message(role="user", content="Book Lisbon for May")])
        mem.wait_idle()                                       # memory caught up
        for hit in mem.recall("my-agent", "where in May?").hits:
            print(hit.score, hit.content, hit.factors)

    async with AsyncClient("http://127.0.0.1:8765") as mem:  # the same methods, awaited
        print((await mem.status()).shards)

Every refusal raises `engram.api.errors.ApiError` with the server's stable code and message.

The sync client speaks HTTP/1.1 with the standard library's `http.client` (one kept-alive connection
per thread): importing it costs a few milliseconds, which is what lets `engram recall` and
`engram status` answer in well under half a second. The async client uses httpx.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Awaitable, Callable, Concatenate, Generic, ParamSpec, Sequence, TypeVar, overload
from urllib.parse import quote, urlencode, urlsplit

import msgspec

from engram.api import types as t
from engram.api.errors import ApiError
from engram.api.positions import merge

DEFAULT_TIMEOUT_S = 600.0  # a workflow or a first recall can take long; a server that died fails at once
JOB_POLL_S = 0.2
KEEP_ALIVE_REUSE_S = 2.0  # uvicorn closes a kept-alive connection after 5 s idle; reconnect well before that
_ENCODER = msgspec.json.Encoder()
_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}
T = TypeVar("T")
P = ParamSpec("P")
_POSITION_LOCK = threading.Lock()  # a client's `position` is merged from every thread that writes through it


def _decoder(cls: type[T]) -> msgspec.json.Decoder[T]:
    dec: msgspec.json.Decoder[T] | None = _DECODERS.get(cls)
    if dec is None:
        dec = _DECODERS[cls] = msgspec.json.Decoder(cls)
    return dec


def _seg(value: str) -> str:
    """An agent or discussion id as a path segment; an unsafe id refused here as the server refuses it (invalid_id),
    since a URL cannot carry it intact ('..' and '/' would change which route it reaches)."""
    from engram.kernel.ids import InvalidIdError, validate_id

    try:
        return quote(validate_id(value, "id"), safe="")
    except InvalidIdError as exc:
        raise ApiError(400, "invalid_id", str(exc)) from None


def _query(params: dict[str, object]) -> str:
    items = {k: ("true" if v is True else "false" if v is False else v) for k, v in params.items() if v is not None}
    return f"?{urlencode(items)}" if items else ""


def refusal(status: int, body: bytes, retry_after: str | None = None) -> ApiError:
    try:
        err = json.loads(body)["error"]
        return ApiError(status, err["code"], err["message"], float(retry_after) if retry_after else None,
                        param=err.get("param"))
    except (ValueError, KeyError, TypeError):
        text = body.decode(errors="replace").strip()[:300]
        return ApiError(status, "internal", f"HTTP {status} from the engram server: {text}")


def _auth_headers(api_key: str | None) -> dict[str, str]:
    key = api_key or os.environ.get("ENGRAM_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def consumed(shard: t.ShardStatus) -> int:
    return min(list(shard.projections.values()) + list(shard.consumers.values()), default=shard.head)


@dataclass(frozen=True)
class _Request(Generic[T]):
    """One operation of the API as a request: what `_call` sends, and the type its answer decodes to."""

    method: str
    path: str
    response: type[T]
    body: object = None  # a request type of `engram.api.types`, sent as JSON
    read: bool = False  # a read of an agent: it waits for this client's writes (`_Operations.position`)


class _Operation(Generic[P, T]):
    """An operation of both clients, declared once (`_Operations`): the function gives the request, the client sends
    it (`_call`). To the type checker `Client().op(...)` is a `T`, `AsyncClient().op(...)` an awaitable `T`."""

    def __init__(self, request: Callable[Concatenate[_Operations, P], _Request[T]]) -> None:
        self.request = request
        self.__name__, self.__doc__ = request.__name__, request.__doc__  # what help(Client) shows

    @overload
    def __get__(self, client: None, owner: type[_Operations]) -> _Operation[P, T]: ...

    @overload
    def __get__(self, client: Client, owner: type[_Operations] | None = None) -> Callable[P, T]: ...

    @overload
    def __get__(self, client: AsyncClient, owner: type[_Operations] | None = None) -> Callable[P, Awaitable[T]]: ...

    def __get__(self, client: _Operations | None, owner: type[_Operations] | None = None) -> object:
        if client is None:
            return self
        request = self.request

        def call(*args: P.args, **kwargs: P.kwargs) -> object:
            return client._call(request(client, *args, **kwargs))

        call.__name__, call.__qualname__, call.__doc__ = request.__name__, request.__qualname__, request.__doc__
        return call


def _operation(request: Callable[Concatenate[_Operations, P], _Request[T]]) -> _Operation[P, T]:
    return _Operation(request)


class _Operations:
    """Every API operation as a request; `_call` (sync or async) sends it.

    Read your writes (`engram.api.positions`): `position` is the furthest position of the writes this client made,
    and every read of an agent sends it as `after`, so a read always sees what this client wrote before it (the
    server waits a bounded time for the memory that read shows, then answers 503 `lagging`). Other clients' reads
    wait for nothing. `read_your_writes=False` turns it off for this client."""

    read_your_writes = True
    position = ""

    def _call(self, request: _Request[T]) -> object:  # pragma: no cover - defined by the clients
        raise NotImplementedError

    def _path(self, request: _Request[T]) -> str:
        """The request's path; a read of an agent's after this client's writes (`position`) unless `read_your_writes`
        is off."""
        path = request.path
        if request.read and self.read_your_writes and self.position:
            path += ("&" if "?" in path else "?") + urlencode({"after": self.position})
        return path

    def _noted(self, result: T) -> T:
        """`result`; a write's position joins this client's (`position`)."""
        written = getattr(result, "position", None)
        if written:
            with _POSITION_LOCK:
                self.position = merge(self.position, written)
        return result

    # ------------------------------------------------------------------ system

    @_operation
    def health(self) -> _Request[t.Health]:
        return _Request("GET", "/v1/health", t.Health)

    @_operation
    def server_info(self) -> _Request[t.ServerInfo]:
        return _Request("GET", "/v1/server", t.ServerInfo)

    @_operation
    def status(self) -> _Request[t.StatusResponse]:
        return _Request("GET", "/v1/status", t.StatusResponse)

    @_operation
    def llm_check(self) -> _Request[t.LlmCheckResponse]:
        """Call each configured LLM endpoint once (`engram llm check`)."""
        return _Request("POST", "/v1/llm/check", t.LlmCheckResponse)

    @_operation
    def sql(self, query: str, params: list[Any] | None = None) -> _Request[t.SqlResponse]:
        return _Request("POST", "/v1/sql", t.SqlResponse, t.SqlRequest(query=query, params=params or []))

    @_operation
    def discussion(self, discussion: str) -> _Request[t.DiscussionResponse]:
        return _Request("GET", f"/v1/discussions/{_seg(discussion)}", t.DiscussionResponse)

    @_operation
    def shutdown(self) -> _Request[dict[str, Any]]:
        return _Request("POST", "/v1/shutdown", dict)

    # ------------------------------------------------------------------ writing

    @_operation
    def append_messages(self, agent: str, discussion: str, messages: list[t.Message]) -> _Request[t.AppendResponse]:
        return _Request("POST", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/messages", t.AppendResponse,
                        t.AppendRequest(messages=list(messages)))

    @_operation
    def append_conversations(self, agent: str, conversations: list[t.Conversation]) -> _Request[t.AppendResponse]:
        return _Request("POST", f"/v1/agents/{_seg(agent)}/messages", t.AppendResponse,
                        t.AppendConversationsRequest(conversations=list(conversations)))

    @_operation
    def record_settings(self, agent: str) -> _Request[t.SettingsRecorded]:
        return _Request("POST", f"/v1/agents/{_seg(agent)}/settings", t.SettingsRecorded)

    @_operation
    def record_tool_failure(self, agent: str, discussion: str, tool: str, error: str, *, arguments: str = "",
                            call_id: str | None = None, ts: datetime | None = None) -> _Request[t.EventResponse]:
        return _Request("POST", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/tool-failures",
                        t.EventResponse, t.ToolFailureRequest(tool=tool, error=error, arguments=arguments,
                                                              call_id=call_id, ts=ts))

    # ------------------------------------------------------------------ listing and paging

    @_operation
    def list_agents(self) -> _Request[t.AgentList]:
        return _Request("GET", "/v1/agents", t.AgentList)

    @_operation
    def list_discussions(self, agent: str, *, limit: int = 100,
                         cursor: str | None = None) -> _Request[t.DiscussionList]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions" + _query({"limit": limit, "cursor": cursor}),
                        t.DiscussionList, read=True)

    @_operation
    def list_messages(self, agent: str, discussion: str, *, order: str = "oldest", limit: int = 100,
                      cursor: str | None = None) -> _Request[t.MessagePage]:
        """A page of a discussion's messages (`cursor`: the seq of the last message you have, or a `next_cursor`)."""
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/messages"
                        + _query({"order": order, "limit": limit, "cursor": cursor}), t.MessagePage, read=True)

    @_operation
    def list_memories(self, agent: str, kind: str = "traces", *, discussion: str | None = None, limit: int = 100,
                      cursor: str | None = None) -> _Request[t.MemoryPage]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/memories"
                        + _query({"kind": kind, "discussion": discussion, "limit": limit, "cursor": cursor}),
                        t.MemoryPage, read=True)

    # ------------------------------------------------------------------ discussion memory

    @_operation
    def search(self, agent: str, discussion: str, keywords: str, *, mode: t.SearchMode = "hybrid",
               limit: int = 5) -> _Request[t.SearchResponse]:
        return _Request("POST", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/search", t.SearchResponse,
                        t.SearchRequest(keywords=keywords, mode=mode, limit=limit), read=True)

    @_operation
    def memories(self, agent: str, discussion: str, *, last: int | None = None) -> _Request[t.MemoriesResponse]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/memories"
                        + _query({"last": last}), t.MemoriesResponse, read=True)

    @_operation
    def summary(self, agent: str, discussion: str) -> _Request[t.SummaryResponse]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/summary", t.SummaryResponse,
                        read=True)

    @_operation
    def compactions(self, agent: str, discussion: str) -> _Request[t.CompactionsResponse]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/compactions",
                        t.CompactionsResponse, read=True)

    @_operation
    def context(self, agent: str, discussion: str, *, query: str | None = None,
                recall: bool = True) -> _Request[t.ContextResponse]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/context"
                        + _query({"query": query, "recall": recall}), t.ContextResponse, read=True)

    @_operation
    def run_workflow(self, agent: str, *, nodes: list[dict[str, Any]] | None = None, text: str | None = None,
                     name: str | None = None, source: str | None = None, discussion: str | None = None,
                     messages: Sequence[t.Message] = ()) -> _Request[t.WorkflowResponse]:
        return _Request("POST", f"/v1/agents/{_seg(agent)}/workflows/run", t.WorkflowResponse,
                        t.WorkflowRequest(nodes=nodes, text=text, name=name, source=source, discussion=discussion,
                                          messages=list(messages)))

    @_operation
    def regenerate(self, agent: str, discussion: str, *, settings: dict[str, Any] | None = None,
                   settings_name: str = "settings.json") -> _Request[t.Job]:
        return _Request("POST", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/regenerate", t.Job,
                        t.RegenerateRequest(settings=settings, settings_name=settings_name))

    @_operation
    def replay_discussion(self, agent: str, discussion: str, *, verify: bool = False) -> _Request[t.Job]:
        return _Request("POST", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/replay", t.Job,
                        t.DiscussionReplayRequest(verify=verify))

    # ------------------------------------------------------------------ cognitive memory

    @_operation
    def recall(self, /, agent: str, query: str, **options: Any) -> _Request[t.RecallResponse]:
        """`options`: the fields of `engram.api.types.RecallRequest` (discussion, limit, weights, hyde, similarity,
        at, as_of, mood, sources)."""
        return _Request("POST", f"/v1/agents/{_seg(agent)}/recall", t.RecallResponse,
                        t.RecallRequest(query=query, **options), read=True)

    @_operation
    def traces(self, agent: str, *, include_inactive: bool = False, limit: int | None = None) -> _Request[t.Table]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/traces" + _query({"all": include_inactive, "limit": limit}),
                        t.Table, read=True)

    @_operation
    def working_memory(self, agent: str) -> _Request[t.WorkingMemoryResponse]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/working-memory", t.WorkingMemoryResponse, read=True)

    @_operation
    def write_working_memory(self, agent: str, markdown: str) -> _Request[t.WorkingMemoryWritten]:
        return _Request("PUT", f"/v1/agents/{_seg(agent)}/working-memory", t.WorkingMemoryWritten,
                        t.WorkingMemoryWrite(markdown=markdown))

    @_operation
    def set_mood(self, agent: str, valence: float, arousal: float, dominance: float, *,
                 reason: str = "set") -> _Request[t.EventResponse]:
        return _Request("PUT", f"/v1/agents/{_seg(agent)}/mood", t.EventResponse,
                        t.MoodRequest(valence=valence, arousal=arousal, dominance=dominance, reason=reason))

    @_operation
    def mood_history(self, agent: str) -> _Request[t.Table]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/mood", t.Table, read=True)

    @_operation
    def observation_logs(self, agent: str) -> _Request[t.Table]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/observations", t.Table, read=True)

    @_operation
    def observation_log(self, agent: str, discussion: str) -> _Request[t.ObservationLogResponse]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/observations",
                        t.ObservationLogResponse, read=True)

    @_operation
    def observation_notes(self, agent: str, discussion: str) -> _Request[t.Table]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/observation-notes", t.Table,
                        read=True)

    @_operation
    def recent_observations(self, agent: str, discussion: str, *, limit: int = 10) -> _Request[t.RecentObservations]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/recent-observations"
                        + _query({"limit": limit}), t.RecentObservations, read=True)

    @_operation
    def consolidations(self, agent: str, *, include_idle: bool = False,
                       limit: int = 50) -> _Request[t.ConsolidationsResponse]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/consolidations"
                        + _query({"all": include_idle, "limit": limit}), t.ConsolidationsResponse, read=True)

    # ------------------------------------------------------------------ chat

    @_operation
    def chat_info(self, agent: str, discussion: str) -> _Request[t.ChatInfo]:
        return _Request("GET", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/chat", t.ChatInfo)

    @_operation
    def chat(self, agent: str, discussion: str, message: str, *, memory: bool = True) -> _Request[t.ChatResponse]:
        return _Request("POST", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/chat", t.ChatResponse,
                        t.ChatRequest(message=message, memory=memory))

    # ------------------------------------------------------------------ forgetting and jobs

    @_operation
    def forget(self, agent: str, discussion: str | None = None, *, reason: str = "") -> _Request[t.Job]:
        path = f"/v1/agents/{_seg(agent)}" + (f"/discussions/{_seg(discussion)}" if discussion else "")
        return _Request("DELETE", path + _query({"reason": reason or None}), t.Job)

    @_operation
    def memory(self, agent: str, kind: str, memory_id: str) -> _Request[t.MemoryItem]:
        """One memory (kind: trace, fact, chunk, vector) as it is now."""
        return _Request("GET", f"/v1/agents/{_seg(agent)}/memories/{_seg(kind)}/{_seg(memory_id)}", t.MemoryItem)

    @_operation
    def edit_memory(self, agent: str, kind: str, memory_id: str, *, content: str | None = None,
                    metadata: dict[str, str] | None = None, title: str | None = None) -> _Request[t.MemoryEdited]:
        """A new text, title (a vector memory's) and/or metadata for one memory (the edit supersedes the old form)."""
        return _Request("PATCH", f"/v1/agents/{_seg(agent)}/memories/{_seg(kind)}/{_seg(memory_id)}", t.MemoryEdited,
                        t.MemoryEdit(content=content, metadata=metadata, title=title))

    @_operation
    def edit_message(self, agent: str, discussion: str, message_id: str, content: str) -> _Request[t.MessageChanged]:
        """New words for one message of a discussion (`MessageEdited`): every memory made from the old ones is
        superseded."""
        return _Request("PATCH", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/messages/{_seg(message_id)}",
                        t.MessageChanged, t.MessageEdit(content=content))

    @_operation
    def remove_message(self, agent: str, discussion: str, message_id: str, *,
                       reason: str = "") -> _Request[t.MessageChanged]:
        """Take one message of a discussion back (`MessageRemoved`): every memory made from it is superseded."""
        return _Request("DELETE", f"/v1/agents/{_seg(agent)}/discussions/{_seg(discussion)}/messages/{_seg(message_id)}"
                        + _query({"reason": reason or None}), t.MessageChanged)

    @_operation
    def delete_memory(self, agent: str, kind: str, memory_id: str, *, reason: str = "") -> _Request[t.Job]:
        """A job erasing one memory from the log and every projection (`wait_job` to see it done)."""
        return _Request("DELETE", f"/v1/agents/{_seg(agent)}/memories/{_seg(kind)}/{_seg(memory_id)}"
                        + _query({"reason": reason or None}), t.Job)

    @_operation
    def replay(self, *, out: str | None = None, as_of: str | None = None, agent: str | None = None,
               verify: bool = False) -> _Request[t.Job]:
        return _Request("POST", "/v1/replay", t.Job, t.ReplayRequest(out=out, as_of=as_of, agent=agent, verify=verify))

    @_operation
    def regenerate_batch(self, *, agent: str | None = None, discussion: str | None = None,
                         resume: bool = False) -> _Request[t.Job]:
        """Regenerate discussion memory through the Message Batches API (a job; see `Api.regenerate_batch`)."""
        return _Request("POST", "/v1/regenerate", t.Job,
                        t.BatchRegenerateRequest(agent=agent, discussion=discussion, resume=resume))

    @_operation
    def reshard(self, shards: int) -> _Request[t.Job]:
        return _Request("POST", "/v1/reshard", t.Job, t.ReshardRequest(shards=shards))

    @_operation
    def reindex(self) -> _Request[t.Job]:
        """Re-embed the home with the configured embedder and switch to it (a job)."""
        return _Request("POST", "/v1/reindex", t.Job)

    @_operation
    def export(self, out: str) -> _Request[t.Job]:
        return _Request("POST", "/v1/export", t.Job, t.ExportRequest(out=out))

    @_operation
    def job(self, job_id: str) -> _Request[t.Job]:
        return _Request("GET", f"/v1/jobs/{quote(str(job_id), safe='')}", t.Job)

    @_operation
    def jobs(self) -> _Request[t.JobList]:
        return _Request("GET", "/v1/jobs", t.JobList)


class Client(_Operations):
    """The API over HTTP, synchronous. `url`: the server (e.g. http://127.0.0.1:8765)."""

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT_S, api_key: str | None = None,
                 read_your_writes: bool = True):
        """`api_key`: the key of a server with API keys (default: $ENGRAM_API_KEY); `read_your_writes`: reads wait
        for this client's writes (see `_Operations`)."""
        self.read_your_writes = read_your_writes
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url.rstrip("/")
        self._parts = parts
        self._host: str = parts.hostname
        self.timeout = timeout
        self._auth = _auth_headers(api_key)
        self._local = threading.local()

    @classmethod
    def for_home(cls, home: str | Path | None = None, *, start: bool = True, timeout: float = DEFAULT_TIMEOUT_S,
                 start_timeout: float = 180.0) -> "Client":
        """The client of the server of `home` (default: $ENGRAM_HOME or ~/.engram); with `start`, a server is
        started in the background when none runs (as every CLI command does)."""
        from engram.server.instance import ServerStartError, home_path, live_server, start_server

        root = home_path(home)
        info = start_server(root, timeout=start_timeout) if start else live_server(root)
        if info is None:
            raise ServerStartError(f"no engram server runs for {root} (start one with `engram serve`)")
        # The server's instance token is the home owner's key (whoever reads the home may use it).
        return cls(info["url"], timeout=timeout, api_key=os.environ.get("ENGRAM_API_KEY") or info.get("token"))

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and time.monotonic() - getattr(self._local, "used_at", 0.0) > KEEP_ALIVE_REUSE_S:
            # The server may already have closed a connection idle this long; a POST (not retried, it may not be
            # idempotent) must never be written into a socket the server is closing.
            conn.close()
            conn = self._local.conn = None
        if conn is None:
            cls = http.client.HTTPSConnection if self._parts.scheme == "https" else http.client.HTTPConnection
            conn = self._local.conn = cls(self._host, self._parts.port, timeout=self.timeout)
        return conn

    def _send(self, method: str, path: str, payload: bytes | None) -> tuple[int, bytes]:
        # Every state-changing request says JSON, body or not: the server's front door refuses one that does not
        # (what an HTML form or a cross-site page sends), unless it carries a key.
        headers = {"Content-Type": "application/json", **self._auth} if payload is not None or method != "GET" \
            else dict(self._auth)
        for attempt in (1, 2):
            conn = self._conn()
            try:
                conn.request(method, self._parts.path.rstrip("/") + path, body=payload, headers=headers)
                resp = conn.getresponse()
                self._local.retry_after = resp.getheader("Retry-After")  # 429 backpressure: when to try again
                data = resp.read()
                self._local.used_at = time.monotonic()
                return resp.status, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()  # a kept-alive connection the server closed: reconnect once
                self._local.conn = None
                if attempt == 2 or method not in ("GET", "PUT", "DELETE"):
                    raise
            except OSError:
                conn.close()
                self._local.conn = None
                raise
        raise AssertionError("unreachable")

    def _call(self, request: _Request[T]) -> T:
        body = request.body
        status, raw = self._send(request.method, self._path(request), None if body is None else _ENCODER.encode(body))
        if status >= 400:
            raise refusal(status, raw, getattr(self._local, "retry_after", None))
        return self._noted(_decoder(request.response).decode(raw))

    # ------------------------------------------------------------------ waiting

    def wait_job(self, job_id: str, *, on_progress: Callable[[t.Job], None] | None = None,
                 timeout: float | None = None) -> t.Job:
        """Poll a job until it ends; `on_progress(job)` on every look."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if on_progress:
                on_progress(job)
            if job.state in ("succeeded", "failed") or (deadline is not None and time.monotonic() > deadline):
                return job
            time.sleep(JOB_POLL_S)

    def wait_idle(self, timeout: float = 600.0, on_progress: Callable[[int, int, tuple[str, ...]], None] | None = None) -> bool:
        """Wait until every projection and policy has handled the whole log and nothing new came
        (`on_progress(done, total, behind)`: in events, as the log grows while memory is created, and the
        projections or policies furthest behind)."""
        from engram.kernel.idle import wait_idle

        def look() -> tuple[list[int], list[dict[str, int]]]:
            shards = self.status().shards
            return [s.head for s in shards], [{**s.projections, **s.consumers} for s in shards]

        return wait_idle(look, timeout, on_progress, JOB_POLL_S)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Operations):
    """The API over HTTP, asynchronous (httpx): every method of `Client` is awaited."""

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT_S, api_key: str | None = None,
                 read_your_writes: bool = True):
        import httpx

        self.read_your_writes = read_your_writes
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, headers=_auth_headers(api_key))

    async def _call(self, request: _Request[T]) -> T:
        method, body = request.method, request.body
        resp = await self._http.request(method, self._path(request),
                                        content=None if body is None else _ENCODER.encode(body),
                                        headers={"Content-Type": "application/json"}
                                        if body is not None or method != "GET" else None)
        if resp.status_code >= 400:
            raise refusal(resp.status_code, resp.content, resp.headers.get("Retry-After"))
        return self._noted(_decoder(request.response).decode(resp.content))

    async def wait_job(self, job_id: str, *, timeout: float | None = None) -> t.Job:
        import asyncio

        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = await self.job(job_id)
            if job.state in ("succeeded", "failed") or (deadline is not None and time.monotonic() > deadline):
                return job
            await asyncio.sleep(JOB_POLL_S)

    async def wait_idle(self, timeout: float = 600.0) -> bool:
        import asyncio

        deadline = time.monotonic() + timeout
        previous = None
        while time.monotonic() < deadline:
            shards = (await self.status()).shards
            heads = [s.head for s in shards]
            if all(consumed(s) >= s.head for s in shards):
                if heads == previous:
                    return True
                previous = heads
                continue
            previous = None
            await asyncio.sleep(JOB_POLL_S)
        return False

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

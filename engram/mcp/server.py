"""engram's MCP server: tools to remember, recall, search, read and write working memory and forget; resources
for a discussion's rolling summary and chunk memories; a prompt to ask what an agent remembers.

    build(backend_for) -> MCPServer     backend_for(ctx) -> ApiBackend | ClientBackend

`engram mcp` runs it over stdio with a `ClientBackend` (the home's server, started if none runs); the
server mounts it at `/mcp` (streamable HTTP, stateless, JSON responses) with an `ApiBackend` scoped by
the request's API key (`McpEndpoint`).

What a model needs to use a tool well is declared with the tool (`tool`): a description saying when to use it,
a description and the bounds of every parameter (`described`), the JSON Schema of its structured result (derived
from the API's response type, so it cannot drift) and its annotations (`READ`, `WRITE`, `REPLACE`, `ERASE`).
Bounds and ids are checked by the API, as REST checks them, so a refusal carries REST's code and message. It is
answered as MCP says a tool error is (`isError: true`, the message in text content): the text is `<code>: <message>`
(the code first, for a model to read), without structured content (REST's error body is not the tool's
outputSchema, and clients such as the MCP Inspector check structured content against it even in an error), and with
REST's error body in `_meta["engram/error"]` for a program that wants the code without parsing text.
tests/server/test_mcp_tools.py holds every tool to this.
"""


import inspect
import json
import types
import typing
from typing import TYPE_CHECKING, Annotated, Any, Awaitable, Callable, Literal, TypeVar

import anyio
import msgspec
import msgspec.structs
from pydantic import Field
from pydantic.fields import FieldInfo

from engram.api import types as t
from engram.api.errors import ApiError, error, translate

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context, MCPServer

    from engram.mcp.backends import ApiBackend, ClientBackend

INSTRUCTIONS = (
    "engram is long-term memory. `remember` appends a message to a discussion of an agent; `recall` returns what "
    "the agent remembers for a question (cognitive memory traces, ranked, across discussions); `search` searches a "
    "discussion's memories by keywords; `working_memory` / `write_working_memory` read and replace the agent's "
    "persistent notes; `edit_memory` / `delete_memory` correct or erase one memory (a trace id from `recall`); "
    "`edit_message` / `remove_message` change or take back one message of a discussion (its memories follow); "
    "`forget` erases a discussion (or the agent) for good. Resources "
    "engram://agents/{agent}/discussions/{discussion}/summary and …/memories hold a discussion's rolling summary "
    "and chunk memories. A refused call answers `<code>: <message>` with the codes of engram's REST API "
    "(invalid_id, invalid_request, unknown_agent, …)."
)

ERROR_META = "engram/error"  # where a refusal carries REST's error body (`_meta`), beside its text

# What each tool does to memory (MCP's tool annotations; none reaches outside engram's home).
READ = {"read_only_hint": True, "destructive_hint": False, "idempotent_hint": True, "open_world_hint": False}
WRITE = {"read_only_hint": False, "destructive_hint": False, "idempotent_hint": False, "open_world_hint": False}
REPLACE = {"read_only_hint": False, "destructive_hint": True, "idempotent_hint": True, "open_world_hint": False}
ERASE = REPLACE

Limit = Annotated[int, msgspec.Meta(ge=1, le=t.MAX_RESULTS)]  # the bounds of REST's recall and search requests


class RecalledMemory(t.Model, kw_only=True):
    """One memory trace recall found, as a model reads it (REST's `RecallHit` without the diagnostics)."""

    rank: int
    trace_id: str  # what `edit_memory` and `delete_memory` take
    score: float
    content: str
    shown: str = ""  # the content as shown to a model (with its time and validity)
    trace_type: str
    factors: dict[str, float]
    valid_from: str | None = None  # true from then…
    valid_to: str | None = None  # …until then (None: still true)
    superseded_by: str = ""  # the trace that replaced it


class Recalled(t.Model, kw_only=True):
    """What `recall` answers over MCP: the question and the memories found, best first."""

    query: str
    agent: str
    hits: list[RecalledMemory]


def bounds(kind: object) -> dict[str, Any]:
    """The JSON Schema keywords of a msgspec type (its bounds, pattern and enum), for a tool parameter's schema."""
    schema: dict[str, Any] = msgspec.json.schema(kind)
    schema.pop("description", None)
    return schema


class Bounds:
    """A tool parameter's bounds in its JSON Schema (pydantic's `json_schema_extra`), from the msgspec type the API
    checks it against (`kind`)."""

    def __init__(self, kind: object) -> None:
        self.kind = kind

    def __call__(self, schema: dict[str, Any]) -> None:
        schema.update(bounds(self.kind))


def described(kind: object, description: str) -> FieldInfo:
    """A tool parameter's description and the bounds of `kind` in the schema a model reads, as the metadata of its
    Python type: `Annotated[str, described(t.Id, "The agent…")]`. The bounds are enforced by the API (REST's codes
    and messages), not by the SDK's argument parsing. `checked` holds the Python type to `kind`'s."""
    field: FieldInfo = Field(description=description, json_schema_extra=Bounds(kind))
    return field


def _python(kind: object) -> object:
    """`kind` without its msgspec constraints (`Annotated[str, Meta(…)] | None` -> `str | None`)."""
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is Annotated:
        return _python(args[0])
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_python(a) for a in args)]
    if isinstance(origin, type) and origin in (dict, list, tuple):
        return types.GenericAlias(origin, tuple(_python(a) for a in args))
    return kind


F = TypeVar("F", bound=Callable[..., Any])


def checked(fn: F) -> F:
    """`fn`, once each parameter `described` has the Python type of the msgspec type its bounds come from (a
    parameter typed `int` with the bounds of a string would publish a schema the SDK does not parse by)."""
    hints: dict[str, object] = inspect.get_annotations(fn, eval_str=True)
    for name, hint in hints.items():
        if typing.get_origin(hint) is not Annotated:
            continue
        python, *metadata = typing.get_args(hint)
        for m in metadata:
            extra = getattr(m, "json_schema_extra", None)
            if isinstance(extra, Bounds) and _python(extra.kind) != _python(python):
                raise TypeError(f"{fn.__name__}: parameter {name} is a {python}, its bounds a {extra.kind}'s")
    return fn


# The parameters most tools take.
Agent = Annotated[str, described(t.Id, "The agent whose memory this is: one id per agent or user (e.g. 'ada'); "
                                       "letters, digits, '_', '-' and '.'.")]
Discussion = Annotated[str, described(t.Id, "A discussion (conversation) of the agent, by its id (e.g. 'trip-2024'); "
                                            "letters, digits, '_', '-' and '.'. A new id starts a new discussion.")]
MessageId = Annotated[str, described(t.Id, "The message's id: the `message_id` it was appended with, or the one engram "
                                           "gave it (a discussion's messages list them: REST "
                                           "`GET …/discussions/{discussion}/messages`).")]
MemoryKind = Annotated[Literal["trace", "fact"], described(Literal["trace", "fact"], "What the id names: a trace or a "
                                                                                     "fact.")]
MemoryId = Annotated[str, described(t.Id, "The memory's id: a hit's `trace_id` from `recall`.")]
Count = Annotated[int, described(Limit, "How many memories to return, best first (1 to 1000).")]
Reason = Annotated[str, described(Annotated[str, msgspec.Meta(max_length=10_000)], "Why, for the record.")]
SearchMode = Literal["keyword", "semantic", "hybrid"]


def object_schema(cls: type) -> dict[str, Any]:
    """The JSON Schema of a response type with its definitions inline at the root (MCP's outputSchema is an
    object)."""
    schema: dict[str, Any] = msgspec.json.schema(cls)
    defs = schema.pop("$defs", {})
    root = defs[schema.pop("$ref").rsplit("/", 1)[1]]
    return {**root, **({"$defs": defs} if defs else {})}


def _plain(value: Any) -> Any:
    return msgspec.to_builtins(value, enc_hook=str)


def build(backend_for: "Callable[[Context[Any, Any]], ApiBackend | ClientBackend]") -> "MCPServer":
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
    from mcp.server.context import ServerRequestContext
    from mcp_types import (
        CallToolResult, InputRequiredResult, ListResourcesResult, PaginatedRequestParams, Resource, TextContent,
        ToolAnnotations,
    )
    from pydantic import ValidationError

    from engram import __version__
    from engram.kernel.logs import keep_root_handlers

    def refused(exc: ApiError) -> CallToolResult:
        """A tool error as MCP's spec has it: no structured content (it would not match the outputSchema)."""
        body = {"error": {"code": exc.code, "message": exc.message}}
        return CallToolResult(content=[TextContent(type="text", text=f"{exc.code}: {exc.message}")],
                              is_error=True, _meta={ERROR_META: body})

    class EngramMCP(MCPServer):
        async def _handle_list_resources(self, ctx: ServerRequestContext[Any],
                                         params: PaginatedRequestParams | None) -> ListResourcesResult:
            """`resources/list`: what the session may read now (its agents' discussions, summaries, memories), not
            only the fixed resources the SDK knows (engram has none: every resource is an agent's)."""
            listed = json.loads(await read(Context(request_context=ctx, mcp_server=self,
                                                   subscriptions=self._subscriptions), "resources"))
            return ListResourcesResult(resources=[Resource(mime_type="application/json", **r) for r in listed])

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None,
                            ) -> CallToolResult | InputRequiredResult:
            """Arguments the SDK could not parse (a string for a number, a missing parameter) refused as REST refuses
            a body that does not match its schema: invalid_request, naming the parameter."""
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if not isinstance(exc.__cause__, ValidationError):
                    raise
                first = exc.__cause__.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                return refused(error("invalid_request", f"{name}: {where}: {first['msg']}"))

    with keep_root_handlers():  # MCPServer() puts a Rich handler on the root logger (logging.basicConfig)
        server = EngramMCP("engram", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    async def run(ctx: Context[Any, Any], method: str, *args: Any) -> Any:
        backend = backend_for(ctx)
        return await anyio.to_thread.run_sync(lambda: getattr(backend, method)(*args))

    async def call(ctx: Context[Any, Any], method: str, *args: Any,
                   shape: Callable[[Any], Any] = _plain) -> CallToolResult:
        """The backend's answer as structured content (and as JSON text, for clients that read only text); a
        refusal as an error result carrying the API's code and message, as REST answers it."""
        try:
            result = shape(_plain(await run(ctx, method, *args)))
        except Exception as exc:
            api_error = translate(exc)
            if api_error is None:
                raise
            return refused(api_error)
        text = msgspec.json.encode(result).decode()
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=result)

    async def read(ctx: Context[Any, Any], method: str, *args: Any) -> str:
        """A resource's JSON; a refusal as the resource error (not found for a 404) with the API's code."""
        try:
            return msgspec.json.encode(_plain(await run(ctx, method, *args))).decode()
        except Exception as exc:
            api_error = translate(exc)
            if api_error is None:
                raise
            text = f"{api_error.code}: {api_error.message}"
            raise (ResourceNotFoundError if api_error.status == 404 else ResourceError)(text) from None

    ToolFunction = Callable[..., Awaitable[CallToolResult]]

    def tool(output: type, annotations: dict[str, bool], description: str) -> Callable[[ToolFunction], ToolFunction]:
        """Register a tool whose structured result is an `output` (its JSON Schema is the tool's outputSchema)."""
        def register(fn: ToolFunction) -> ToolFunction:
            server.add_tool(checked(fn), description=description, annotations=ToolAnnotations(**annotations),
                            structured_output=False)
            registered = server._tool_manager.get_tool(fn.__name__)
            assert registered is not None  # just added
            registered.fn_metadata.output_schema = object_schema(output)  # published; the result is built by `call`
            return fn
        return register

    @tool(t.AppendResponse, WRITE,
          "Remember something: append one message to a discussion of an agent. Use it for every turn worth keeping "
          "(the user's words, your reply, a fact you learned). engram builds memories from it in the background "
          "(chunk memories, the rolling summary, memory traces). Appending the same text twice stores it twice.")
    async def remember(agent: Agent, discussion: Discussion,
                       content: Annotated[str, described(Annotated[str, msgspec.Meta(max_length=10_000_000)],
                                                         "The message's text, as said.")],
                       ctx: Context[Any, Any],
                       role: Annotated[t.Role, described(t.Role, "Who said it: user (default), assistant, system or "
                                                                 "tool.")] = "user") -> CallToolResult:
        return await call(ctx, "remember", agent, discussion, role, content)

    @tool(Recalled, WRITE,
          "Recall what an agent remembers that bears on a question, across all its discussions (or one): its memory "
          "traces ranked by strength, similarity, recency, emotion, activation and importance. Use it before "
          "answering anything that may depend on the past. Not read-only: as in human memory, recalling a memory "
          "reinforces it.")
    async def recall(agent: Agent,
                     query: Annotated[str, described(Annotated[str, msgspec.Meta(min_length=1, max_length=100_000)],
                                                     "The question or topic, in plain words (e.g. 'where does Ines "
                                                     "live?').")],
                     ctx: Context[Any, Any],
                     discussion: Annotated[str | None, described(t.Id | None, "Only memories of this discussion "
                                                                              "(default: every discussion of the "
                                                                              "agent).")] = None,
                     limit: Count = 5,
                     as_of: Annotated[str | None, described(Annotated[str, msgspec.Meta(max_length=64)] | None,
                                                            "ISO-8601 time: what was true then (superseded facts "
                                                            "included, later ones left out). Default: now.")] = None,
                     ) -> CallToolResult:
        fields = [f.encode_name for f in msgspec.structs.fields(RecalledMemory)]
        return await call(ctx, "recall", agent, query, discussion, limit, as_of, shape=lambda r: {
            "query": r["query"], "agent": r["agent"], "hits": [{k: h[k] for k in fields} for h in r["hits"]]})

    @tool(t.SearchResponse, READ,
          "Search one discussion's chunk memories (summaries of stretches of the conversation) by keywords. Use it "
          "to find where something was said in a known discussion; use `recall` for what the agent remembers "
          "overall.")
    async def search(agent: Agent, discussion: Discussion,
                     keywords: Annotated[str, described(Annotated[str, msgspec.Meta(max_length=10_000)],
                                                        "Keywords or phrases, separated by ';' (any may match).")],
                     ctx: Context[Any, Any],
                     mode: Annotated[SearchMode, described(SearchMode, "keyword (exact words), semantic (meaning) or "
                                                                       "hybrid (both; default).")] = "hybrid",
                     limit: Count = 5) -> CallToolResult:
        return await call(ctx, "search", agent, discussion, keywords, mode, limit)

    @tool(t.WorkingMemoryResponse, READ,
          "Read an agent's working memory: what is in focus now (its slots, with activation) and its persistent "
          "notes (markdown). Use it at the start of a session to pick up where the agent left off.")
    async def working_memory(agent: Agent, ctx: Context[Any, Any]) -> CallToolResult:
        return await call(ctx, "working_memory", agent)

    @tool(t.WorkingMemoryWritten, REPLACE,
          "Replace an agent's persistent working-memory notes with new markdown (cut to their budget, 5% of the "
          "context window). Use it to keep standing notes (goals, preferences); the previous notes are replaced.")
    async def write_working_memory(agent: Agent,
                                   markdown: Annotated[str, described(Annotated[str, msgspec.Meta(max_length=1_000_000)],
                                                                      "The whole new notes, in markdown.")],
                                   ctx: Context[Any, Any]) -> CallToolResult:
        return await call(ctx, "write_working_memory", agent, markdown)

    @tool(t.Job, ERASE,
          "Forget for good: erase one discussion of an agent, or without `discussion` the whole agent, from the "
          "log and every projection. Use it only when the user asks to be forgotten; it cannot be undone.")
    async def forget(agent: Agent, ctx: Context[Any, Any],
                     discussion: Annotated[str | None, described(t.Id | None, "The discussion to erase (default: the "
                                                                              "whole agent).")] = None,
                     reason: Reason = "forgotten over MCP") -> CallToolResult:
        return await call(ctx, "forget", agent, discussion, reason)

    @tool(t.MemoryEdited, REPLACE,
          "Correct one memory: give a trace (or fact) id from `recall` and its new text and/or metadata. Use it when "
          "a remembered fact is wrong or out of date; the new form supersedes the old one and recall finds it from "
          "now on.")
    async def edit_memory(agent: Agent, memory_id: MemoryId, ctx: Context[Any, Any],
                          content: Annotated[str | None, described(
                              Annotated[str, msgspec.Meta(min_length=1, max_length=100_000)] | None,
                              "The memory's new text (default: keep the text).")] = None,
                          metadata: Annotated[dict[str, str] | None, described(
                              t.Metadata | None, "Labels to set: a flat object of strings (default: keep them; {} "
                                                 "clears them).")] = None,
                          kind: MemoryKind = "trace") -> CallToolResult:
        return await call(ctx, "edit_memory", agent, kind, memory_id, content, metadata)

    @tool(t.Job, ERASE,
          "Delete one wrong memory for good: a trace (or fact) id from `recall`. Its text is erased from the log and "
          "every projection; the messages it came from stay. Use it only when a memory must not exist; it cannot be "
          "undone.")
    async def delete_memory(agent: Agent, memory_id: MemoryId, ctx: Context[Any, Any], kind: MemoryKind = "trace",
                            reason: Reason = "deleted over MCP") -> CallToolResult:
        return await call(ctx, "delete_memory", agent, kind, memory_id, reason)

    @tool(t.MessageChanged, REPLACE,
          "Correct one message of a discussion: give its id and the words it should have said. Use it when the user "
          "corrects something they said (a typo, a wrong fact); every memory made from the old words (facts, chunk "
          "memories, the summary) is superseded by what the new words make. The old words stay in the log for replay.")
    async def edit_message(agent: Agent, discussion: Discussion, message_id: MessageId,
                           content: Annotated[str, described(
                               Annotated[str, msgspec.Meta(min_length=1, max_length=1_000_000)],
                               "The message's new words, whole (held to the server's message size limit, "
                               "limits.maxMessageChars).")],
                           ctx: Context[Any, Any]) -> CallToolResult:
        return await call(ctx, "edit_message", agent, discussion, message_id, content)

    @tool(t.MessageChanged, ERASE,
          "Take one message of a discussion back: the conversation no longer holds it and every memory made from it "
          "is superseded (recall stops answering from it). Use it when the user retracts what a message said. Its "
          "words stay in the log for replay; `forget` the discussion to erase them.")
    async def remove_message(agent: Agent, discussion: Discussion, message_id: MessageId, ctx: Context[Any, Any],
                             reason: Annotated[str, described(Annotated[str, msgspec.Meta(max_length=1_000)],
                                                              "Why, for the record.")] = "removed over MCP",
                             ) -> CallToolResult:
        return await call(ctx, "remove_message", agent, discussion, message_id, reason)

    @server.resource("engram://agents/{agent}/discussions/{discussion}/summary", mime_type="application/json",
                     description="A discussion's rolling summary (<id>_summary.jsonl), null before the first one.")
    async def summary(agent: str, discussion: str, ctx: Context[Any, Any]) -> str:
        return await read(ctx, "summary", agent, discussion)

    @server.resource("engram://agents/{agent}/discussions/{discussion}/memories", mime_type="application/json",
                     description="A discussion's chunk memories (<id>_memories.jsonl), oldest first.")
    async def memories(agent: str, discussion: str, ctx: Context[Any, Any]) -> str:
        return await read(ctx, "memories", agent, discussion)

    @server.resource("engram://agents/{agent}/discussions", mime_type="application/json",
                     description="An agent's discussions (ids, messages, tokens, first and last activity).")
    async def discussions(agent: str, ctx: Context[Any, Any]) -> str:
        return await read(ctx, "list_discussions", agent)

    @server.resource("engram://agents/{agent}/memories", mime_type="application/json",
                     description="An agent's memory traces in the order they were made (the first page).")
    async def agent_memories(agent: str, ctx: Context[Any, Any]) -> str:
        return await read(ctx, "list_memories", agent)

    @server.prompt(description="Ask what an agent remembers about a topic: the model recalls it first, then answers "
                               "from what was recalled and says what it does not remember.")
    @checked
    def what_do_you_remember(agent: Agent, topic: Annotated[str, described(
            Annotated[str, msgspec.Meta(min_length=1, max_length=10_000)],
            "What to remember (a person, a place, a plan…).")]) -> str:
        return (f"What do you remember about {topic}? Call the `recall` tool with agent {agent!r} and the query "
                f"{topic!r} first; answer only from the memories it returns, citing them, and say plainly if "
                f"nothing relevant is remembered.")

    return server

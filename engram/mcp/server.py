"""engram's MCP server: tools to remember, recall, search, read and write working memory and forget; resources
for a discussion's rolling summary and chunk memories.

    build(backend_for) -> MCPServer     backend_for(ctx) -> ApiBackend | ClientBackend

`engram mcp` runs it over stdio with a `ClientBackend` (the home's server, started if none runs); the
server mounts it at `/mcp` (streamable HTTP, stateless, JSON responses) with an `ApiBackend` scoped by
the request's API key (`McpEndpoint`). A refusal is a tool error carrying the API's code and message.
"""


from typing import Annotated, Any, Callable, Literal

import anyio
import msgspec

from engram.api.errors import translate

INSTRUCTIONS = (
    "engram is long-term memory. `remember` appends a message to a discussion of an agent; `recall` returns what "
    "the agent remembers for a question (cognitive memory traces, ranked, across discussions); `search` searches a "
    "discussion's memories by keywords; `working_memory` / `write_working_memory` read and replace the agent's "
    "persistent notes; `forget` erases a discussion (or the agent) for good. Resources "
    "engram://agents/{agent}/discussions/{discussion}/summary and …/memories hold a discussion's rolling summary "
    "and chunk memories."
)


def _plain(value) -> Any:
    return msgspec.to_builtins(value, enc_hook=str)


def build(backend_for: Callable):
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
    from pydantic import Field

    from engram.api.types import MAX_RESULTS

    Limit = Annotated[int, Field(ge=1, le=MAX_RESULTS)]  # the bounds REST's recall and search requests have

    from engram import __version__

    from engram.kernel.logs import keep_root_handlers

    with keep_root_handlers():  # MCPServer() puts a Rich handler on the root logger (logging.basicConfig)
        server = MCPServer("engram", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")

    async def call(ctx, method: str, *args, resource: bool = False):
        """The backend's answer; a refusal as the tool error (or, for a resource, the resource error: not found for
        a 404) carrying the API's code and message, as REST answers it."""
        backend = backend_for(ctx)
        try:
            return _plain(await anyio.to_thread.run_sync(lambda: getattr(backend, method)(*args)))
        except Exception as exc:
            refused = translate(exc)
            if refused is None:
                raise
            text = f"{refused.code}: {refused.message}"
            if not resource:
                raise ToolError(text) from None
            raise (ResourceNotFoundError if refused.status == 404 else ResourceError)(text) from None

    @server.tool(description="Remember: append one message (role user, assistant, system or tool) to a discussion of "
                             "an agent. Memory creation (chunk memories, summary, traces) follows in the background.")
    async def remember(agent: str, discussion: str, content: str, ctx: Context,
                       role: Literal["user", "assistant", "system", "tool"] = "user") -> dict:
        return await call(ctx, "remember", agent, discussion, role, content)

    @server.tool(description="Recall what an agent remembers for a question: its memory traces ranked by the "
                             "six-factor composite (strength, similarity, recency, emotion, activation, importance). "
                             "as_of (ISO-8601): what was true then (superseded facts included, later ones left out).")
    async def recall(agent: str, query: str, ctx: Context, discussion: str | None = None, limit: Limit = 5,
                     as_of: str | None = None) -> dict:
        result = await call(ctx, "recall", agent, query, discussion, limit, as_of)
        return {"query": result["query"], "agent": result["agent"],
                "hits": [{k: h[k] for k in ("rank", "score", "content", "shown", "trace_type", "factors", "valid_from",
                                            "valid_to", "superseded_by")} for h in result["hits"]]}

    @server.tool(description="Search a discussion's memories (keywords separated by ';'; keyword, semantic or hybrid).")
    async def search(agent: str, discussion: str, keywords: str, ctx: Context,
                     mode: Literal["keyword", "semantic", "hybrid"] = "hybrid", limit: Limit = 5) -> dict:
        return await call(ctx, "search", agent, discussion, keywords, mode, limit)

    @server.tool(description="Read an agent's working memory: the slots in focus and its persistent notes (markdown).")
    async def working_memory(agent: str, ctx: Context) -> dict:
        return await call(ctx, "working_memory", agent)

    @server.tool(description="Replace an agent's persistent working-memory notes (markdown, cut to their budget).")
    async def write_working_memory(agent: str, markdown: str, ctx: Context) -> dict:
        return await call(ctx, "write_working_memory", agent, markdown)

    @server.tool(description="Forget for good: erase a discussion of an agent (or, without discussion, the whole "
                             "agent) from the log and every projection. Cannot be undone.")
    async def forget(agent: str, ctx: Context, discussion: str | None = None, reason: str = "forgotten over MCP") -> dict:
        return await call(ctx, "forget", agent, discussion, reason)

    @server.resource("engram://agents/{agent}/discussions/{discussion}/summary", mime_type="application/json",
                     description="A discussion's rolling summary (<id>_summary.jsonl), null before the first one.")
    async def summary(agent: str, discussion: str, ctx: Context) -> str:
        return msgspec.json.encode(await call(ctx, "summary", agent, discussion, resource=True)).decode()

    @server.resource("engram://agents/{agent}/discussions/{discussion}/memories", mime_type="application/json",
                     description="A discussion's chunk memories (<id>_memories.jsonl), oldest first.")
    async def memories(agent: str, discussion: str, ctx: Context) -> str:
        return msgspec.json.encode(await call(ctx, "memories", agent, discussion, resource=True)).decode()

    return server



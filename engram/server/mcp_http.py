"""`/mcp` in the engram app: MCP's streamable HTTP transport, each call scoped by the API key of its request (the tools
themselves are `engram.mcp.server`)."""

from __future__ import annotations

import asyncio

from engram.api.errors import ApiError
from engram.mcp.backends import ApiBackend, Sessions
from engram.mcp.server import build
from engram.server.auth import authenticate_headers, principal_for
from engram.server.endpoint import ensure_state, error_response


class McpEndpoint:
    """`/mcp` in the engram app: MCP's streamable HTTP (stateless, JSON responses), each call scoped by the API key
    of its request. Pure ASGI; the SDK's session manager starts at the first request, on the serving loop.

    Host, Origin and the peer are checked before, for every route (`engram.server.frontdoor`)."""

    def __init__(self, app_state):
        self.state = app_state
        self._manager = None
        self._asgi = None
        self._lock: asyncio.Lock | None = None
        self._stop: asyncio.Event | None = None
        self.sessions = Sessions()  # read your writes: a key's reads wait for that key's writes over /mcp

    def _backend_for(self, ctx):
        principal = principal_for(self.state, ctx.headers or {})
        return ApiBackend(self.state.api, principal, self.sessions.of(principal))

    async def _start(self) -> None:
        if self._asgi is not None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._asgi is not None:
                return
            from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
            from mcp.server.transport_security import TransportSecuritySettings

            server = build(self._backend_for)
            manager = StreamableHTTPSessionManager(
                app=server._lowlevel_server, json_response=True, stateless=True,
                security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))
            ready, stop = asyncio.Event(), asyncio.Event()
            self._stop = stop

            async def run() -> None:
                async with manager.run():
                    ready.set()
                    await stop.wait()

            self._task = asyncio.get_running_loop().create_task(run())
            await ready.wait()
            self._manager, self._asgi = manager, StreamableHTTPASGIApp(manager)

    async def __call__(self, scope, receive, send) -> None:
        state = self.state
        if state.api is None:
            from starlette.concurrency import run_in_threadpool

            await run_in_threadpool(ensure_state, state)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        try:
            authenticate_headers(state, headers)
        except ApiError as exc:
            return await error_response(exc)(scope, receive, send)
        await self._start()
        await self._asgi(scope, receive, send)

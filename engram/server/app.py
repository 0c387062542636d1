"""The engram HTTP app: REST over `engram.api`, its OpenAPI document, JSON errors, a body limit.

`create_app(api, identity, shutdown=…)` is all a host needs (uvicorn in `engram.boot.serve`, or a Ray Serve
deployment in `engram.boot.ray_serve`). Every refusal is `{"error": {"code", "message"}}` with its
4xx; a request refused for its body never reaches an operation, so nothing is appended.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from engram.api.errors import ApiError, error, translate, translated_exceptions
from engram.kernel.logs import describe
from engram.server.endpoint import SCHEMA_TYPES, describe_document, error_response
from engram.server.frontdoor import FrontDoor
from engram.server.keys import KeyRing
from engram.server.mcp_http import McpEndpoint
from engram.server.routes import ROUTERS

log = logging.getLogger("engram.server")

DEFAULT_MAX_BODY_BYTES = 32 << 20


class BodyLimit:
    """Refuse request bodies over `limit` bytes with 413 before an operation sees them (pure ASGI)."""

    def __init__(self, app, limit: int = DEFAULT_MAX_BODY_BYTES):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        too_large = error("body_too_large", f"the request body is over {self.limit} bytes "
                                            "(server.maxBodyBytes in engram.json); send less per request")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await error_response(too_large, scope.get("path", ""))(scope, receive, send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise too_large
            return message

        try:
            return await self.app(scope, limited, send)
        except ApiError as exc:
            if exc.code != "body_too_large":
                raise
            return await error_response(exc, scope.get("path", ""))(scope, receive, send)


def only_cause(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one member each (what a task group raises), else `exc`."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class Tracked:
    """Counts the requests in flight and notes when the last one ended (`Activity`, read by the idle timeout). Pure
    ASGI: Starlette's BaseHTTPMiddleware would run the app in a task group, so that an error raised while the body is
    read (body_too_large, a client that went away) reached the app's handlers wrapped in an ExceptionGroup (a 500)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        act = scope["app"].state.activity
        act.in_flight += 1
        try:
            return await self.app(scope, receive, send)
        finally:
            act.in_flight -= 1
            act.last = time.monotonic()


class Answered:
    """The outermost layer: an error the app has answered (500, logged in one line by its handler) is not raised
    on to the host, which would log it again with its whole traceback (uvicorn: "Exception in ASGI application")."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        try:
            await self.app(scope, receive, send)
        except Exception:  # Starlette's ServerErrorMiddleware answered it and re-raised it for the host to log
            pass


class EngramApp(FastAPI):
    def build_middleware_stack(self):
        return Answered(super().build_middleware_stack())


class Activity:
    """When the last request ended, and how many are in flight (the idle timeout reads it)."""

    def __init__(self):
        self.last = time.monotonic()
        self.in_flight = 0

    def idle_for(self) -> float:
        return 0.0 if self.in_flight else time.monotonic() - self.last


def create_app(api, identity, *, shutdown: Callable[[], None] = lambda: None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               activity: Activity | None = None, factory: Callable | None = None, host: str | None = None,
               allowed_hosts: tuple[str, ...] | None = None) -> FastAPI:
    """`identity`: who this server is (`engram.server.instance.Identity`: the home, the instance token…);
    `factory() -> (api, identity, shutdown)`: build them in the process that serves, on first use. `host`: what the
    server listens on and `allowed_hosts` (`server.allowedHosts`), for the front door (default: the api's config)."""
    from engram import __version__

    app = EngramApp(title="engram", version=__version__, docs_url="/docs", redoc_url=None,
                  description="Long-term memory for AI agents: REST over engram's API, one resource per operation, "
                              "scoped per agent. Every refusal is {\"error\": {\"code\", \"message\"}} with its 4xx.")
    app.state.api = api
    app.state.identity = identity
    app.state.shutdown = shutdown
    app.state.activity = activity or Activity()
    app.state.factory = factory
    app.state.keys = None if identity is None else KeyRing(Path(identity.home))
    for router in ROUTERS:
        app.include_router(router)

    @app.exception_handler(ApiError)
    async def api_error(request, exc: ApiError):
        return error_response(exc, request.url.path)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error_response(error("invalid_request", f"{where}: {first.get('msg', 'invalid')}"), request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request, exc: StarletteHTTPException):
        code = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large", 415: "unsupported_media_type"}.get(
            exc.status_code, "invalid_request")
        message = {404: f"no such resource: {request.method} {request.url.path} (see /openapi.json)",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(exc.status_code, str(exc.detail))
        return error_response(ApiError(exc.status_code, code, message), request.url.path)

    async def translated(request, exc: Exception):
        return error_response(translate(exc) or error("internal", f"{type(exc).__name__}: {exc}"), request.url.path)

    # The domain exceptions that are the caller's doing, answered by Starlette's exception middleware: the handler of
    # `Exception` below answers too, but the server then also re-raises, logs a traceback and drops the
    # connection, which breaks the client's next request on it (the openai SDK keeps connections alive).
    for kind in translated_exceptions():
        app.add_exception_handler(kind, translated)

    @app.exception_handler(ClientDisconnect)
    async def went_away(request, exc: ClientDisconnect):
        # Not an error: the client closed the connection before it sent the whole body, so nothing was done and
        # nobody reads an answer. One short line (at INFO), no traceback.
        log.info("%s %s: the client went away before sending its whole body; nothing done", request.method,
                 request.url.path)
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def unexpected(request, raised: Exception):
        exc = only_cause(raised)
        api_exc = translate(exc)
        if api_exc is not None:
            return error_response(api_exc, request.url.path)
        log.error("%s %s failed: %s", request.method, request.url.path, describe(exc))
        return error_response(error("internal", f"{type(exc).__name__}: {exc} (the server log has the details)"),
                              request.url.path)

    def openapi() -> dict:
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            from engram.api.types import schema_components

            doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            _, components = schema_components(SCHEMA_TYPES)
            doc.setdefault("components", {}).setdefault("schemas", {}).update(components)
            for name in ("HTTPValidationError", "ValidationError"):
                doc["components"]["schemas"].pop(name, None)
            for item in doc.get("paths", {}).values():
                for op in item.values():
                    op.get("responses", {}).pop("422", None) if _fastapi_422(op) else None
            app.openapi_schema = describe_document(doc)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend its document
    from starlette.routing import Route

    # MCP's streamable HTTP (not in the OpenAPI document: its own protocol); scoped by the request's key.
    app.router.routes.append(Route("/mcp", endpoint=McpEndpoint(app.state), methods=["GET", "POST", "DELETE"]))
    app.add_middleware(Tracked)
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    server = api.config.server if api is not None else None
    app.add_middleware(FrontDoor, state=app.state, host=host or (server.host if server else "127.0.0.1"),
                       allowed_hosts=allowed_hosts if allowed_hosts is not None else
                       tuple(server.allowed_hosts if server else ()))  # outermost: before anything reads the body
    return app


def _fastapi_422(op: dict) -> bool:
    """FastAPI's own 422 entry (its validation error schema), replaced by ours."""
    schema = op.get("responses", {}).get("422", {}).get("content", {}).get("application/json", {}).get("schema", {})
    return schema.get("$ref", "").endswith("/HTTPValidationError")

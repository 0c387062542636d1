"""How an API operation becomes a route: msgspec bodies in and out, JSON errors, OpenAPI schemas.

    @route(router, "POST", "/v1/agents/{agent}/recall", body=t.RecallRequest, response=t.RecallResponse)
    def recall(api, agent: str, body: t.RecallRequest):
        return api.recall(agent, body)

The handler's own parameters after `api` (path and query parameters, typed) are what FastAPI parses
and documents; `body` is decoded by msgspec from the raw request (unknown fields refused) and
documented by its JSON Schema; the result is encoded by msgspec. Handlers are plain functions run on
the server's thread pool (operations block on the runtime). A handler whose first parameter is
`server` instead of `api` gets the app's state (the api, the health document, shutdown).

Every route asks the auth hook first (`engram.server.auth`) who the request's principal is, and hands the
handler the API as that principal sees it (`engram.api.access.ScopedApi`): the one place that decides what a key
may see. The route's `access` says what is refused before the body is read: "agent" (the default for a path with
`{agent}`: the key must be allowed that agent), "home" (the default otherwise: an operation on the whole home, for
admin keys), "key" (any valid key; the ScopedApi scopes what the operation shows) or "open" (no key needed: the
health probe, and nothing that grants access). So a new route is scoped by default and cannot escape the keys.
"""

from __future__ import annotations

import inspect
import threading
from pathlib import Path
from typing import Any, Callable

import msgspec
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from engram.api.errors import ApiError, CODES, error, translate
from engram.server.auth import authenticate
from engram.server.keys import KeyRing

ACCESS = ("agent", "home", "key", "open")

SCHEMA_TYPES: list[type] = []  # every type a route names, for the OpenAPI components
# Values of read models msgspec has no JSON form for (a DuckDB interval, a UUID…) travel as text.
_ENCODER = msgspec.json.Encoder(decimal_format="number", enc_hook=str)
_decoders: dict[type, msgspec.json.Decoder] = {}


def ref(cls: type) -> dict:
    if cls not in SCHEMA_TYPES:
        SCHEMA_TYPES.append(cls)
    return {"$ref": f"#/components/schemas/{cls.__name__}"}


# The OpenAPI security schemes: how a request presents its API key (`engram.server.auth`), and the inspector's
# browser session. With no key configured (`<home>/keys.json` empty) the server listens on loopback only and needs none.
SECURITY_SCHEMES = {
    "bearerKey": {"type": "http", "scheme": "bearer", "bearerFormat": "ek-…",
                  "description": "An engram API key (`engram keys add --agents a,b`, or `--agents '*'` for every agent) "
                                 "as `Authorization: Bearer <key>`. Needed once the home has a key; before that the "
                                 "server listens on loopback only and asks for none."},
    "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key",
                     "description": "The same API key in an `X-API-Key` header (for clients that cannot set "
                                    "Authorization)."},
    "inspectorSession": {"type": "apiKey", "in": "cookie", "name": "engram_session",
                         "description": "The inspector's browser session: `/inspect/login` takes an API key once and "
                                        "sets this HttpOnly, SameSite=Strict cookie, valid for `/inspect` only (its "
                                        "pages are not operations of this document)."},
}
KEY_SECURITY: list[dict[str, list[str]]] = [{"bearerKey": []}, {"apiKeyHeader": []}]
ACCESS_NOTES = {
    "agent": "Needs a key allowed this agent (another key's agent answers 404 unknown_agent, as an unknown one).",
    "home": "Needs an admin key (one for every agent, `--agents '*'`); a key limited to agents answers 403 forbidden.",
    "key": "Needs any valid key; what it shows is scoped to the key's agents.",
    "open": "Needs no key (it grants no access and tells nothing about the home).",
}


# What the parameters that many operations share mean (an operation may describe its own: `Query(description=…)`).
PARAMETERS = {
    "agent": "The agent's id: letters, digits, '_', '-' and '.' (1-128 characters, no leading dot).",
    "discussion": "The discussion's id, within its agent: letters, digits, '_', '-' and '.'.",
    "job_id": "The job's id, as the operation that started it answered.",
    "challenge": "A random value of the caller's (hex, 16-128 characters), that the proof covers.",
    "limit": "At most this many rows (the latest or best ones, as the operation says).",
    "last": "Only the last N records.",
    "all": "Include the inactive ones too (soft-deleted traces, idle consolidation runs).",
    "reason": "Why, for the record (kept in the log's forget marker, or the message's removal).",
    "query": "The question the context is assembled for (its recalled memories).",
    "recall": "Recall memories for the query into the context (default true).",
    "order": "oldest (default) or newest first.",
    "kind": "Which kind of memory: a trace or a fact, a chunk memory or a vector memory (listing: traces by default, "
            "or chunk memories, vector memories, observations).",
    "memory_id": "The memory's id: a recall hit's trace_id, or a chunk or vector memory's memory_id.",
    "message_id": "The message's id, as its append answered or the discussion's message list shows it.",
}


def describe_document(doc: dict) -> dict:
    """The OpenAPI document with its security schemes, every operation's security (an API key unless its route says
    it is open) and the shared parameters' descriptions."""
    doc.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    for item in doc.get("paths", {}).values():
        for op in item.values():
            if not isinstance(op, dict):
                continue
            op.setdefault("security", KEY_SECURITY)
            for param in op.get("parameters", []):
                if not param.get("description") and param.get("name") in PARAMETERS:
                    param["description"] = PARAMETERS[param["name"]]
    return doc


def security(access: str) -> list:
    """An operation's OpenAPI `security`: none for an open route, else an API key (bearer or X-API-Key)."""
    return [] if access == "open" else KEY_SECURITY


def json_response(value: Any, status: int = 200) -> Response:
    return Response(_ENCODER.encode(value), status_code=status, media_type="application/json")


def error_responses(*codes: str) -> dict:
    from engram.api.types import ErrorResponse

    statuses = sorted({CODES[c] for c in ("invalid_request", "body_too_large", "internal", "runtime_unavailable",
                                          "unauthorized", *codes)})
    return {s: {"description": "refused: {\"error\": {\"code\", \"message\"}}",
                "content": {"application/json": {"schema": ref(ErrorResponse)}}} for s in statuses}


def decode(cls: type, raw: bytes):
    decoder = _decoders.get(cls)
    if decoder is None:
        decoder = _decoders[cls] = msgspec.json.Decoder(cls)
    if not raw.strip():
        raise error("invalid_request", f"the request body is empty; expected a JSON object ({cls.__name__})")
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise error("invalid_request", f"{cls.__name__}: {exc}{fields_hint(cls, str(exc))}") from None
    except msgspec.DecodeError as exc:
        raise error("invalid_request", f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise error("invalid_request", f"the request body is nested too deeply ({cls.__name__})") from None


def fields_hint(cls: type, message: str) -> str:
    """For a body with an unknown field, the fields of the object it is in (the closest one first): `{"sql": …}`
    to /v1/sql is told that the field is `query`."""
    import difflib
    import re

    import msgspec.inspect

    unknown = re.fullmatch(r"Object contains unknown field `([^`]*)`(?: - at `\$(.*)`)?", message)
    struct = _struct_at(msgspec.inspect.type_info(cls), unknown.group(2) or "") if unknown is not None else None
    if unknown is None or struct is None:
        return ""
    names = [f.encode_name for f in struct.fields]
    close = difflib.get_close_matches(unknown.group(1), names, n=1, cutoff=0.5)
    listed = ", ".join(f"`{f.encode_name}`" + (" (required)" if f.required else "") for f in struct.fields)
    return (f"; did you mean `{close[0]}`?" if close else "") + f"; {struct.cls.__name__}'s fields are {listed}"


def _struct_at(info, path: str):
    """The Struct type at `path` (`.messages[0]`, msgspec's error location) inside `info`, or None."""
    import re

    for name, _index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path):
        info = _bare(info)
        if name:
            fields = {f.encode_name: f.type for f in getattr(info, "fields", ())}
            if name not in fields:
                return None
            info = fields[name]
        else:
            info = getattr(info, "item_type", None)
        if info is None:
            return None
    info = _bare(info)
    return info if isinstance(info, msgspec.inspect.StructType) else None


def _bare(info):
    """A type without its metadata (a description, bounds) and, for an optional one, its non-null member (None when
    it has several)."""
    while True:
        if isinstance(info, msgspec.inspect.Metadata):
            info = info.type
        elif isinstance(info, msgspec.inspect.UnionType):
            members = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
            if len(members) != 1:
                return None
            info = members[0]
        else:
            return info


AFTER_DOC = ("Read your writes: the `position` a write answered with. The read answers once what it reads has "
             "handled that position (at most limits.readAfterWaitSeconds, then 503 `lagging` naming what lags); "
             "without it, the read answers at once with what is folded now.")


def route(router: APIRouter, method: str, path: str, *, response: type | None, body: type | None = None,
          status: int = 200, errors: tuple[str, ...] = (), summary: str | None = None,
          access: str | None = None, reads: str | None = None) -> Callable:
    """`reads`: the route is a read of what `engram.api.positions.READS[reads]` folds: it takes `after` (a write's
    position token) and answers once those consumers have handled it (`Api.reach`)."""
    access = access or ("agent" if "{agent}" in path else "home")
    assert access in ACCESS, access
    assert reads is None or "{agent}" in path, "a read after a position is a read of one agent"

    def register(handler: Callable) -> Callable:
        # eval_str: a route module's annotations (`from __future__ import annotations`) resolved in its own globals
        all_params = list(inspect.signature(handler, eval_str=True).parameters.values())
        wants_state = all_params[0].name == "server"
        params = all_params[1:]  # after `api` / `server`
        wants_principal = any(p.name == "principal" for p in params)
        visible = [p for p in params if p.name not in ("body", "principal")]

        async def endpoint(request: Request, **kwargs):
            state = request.app.state
            if state.api is None:

                await run_in_threadpool(ensure_state, state)
            principal = None if access == "open" else authenticate(request)
            if principal is not None and access == "agent":
                principal.require(kwargs["agent"])
            elif principal is not None and access == "home":
                principal.require_admin(f"{method} {path}")
            if wants_principal:
                kwargs["principal"] = principal
            if body is not None:
                kwargs["body"] = decode(body, await request.body())
            scoped = state.api.scoped(principal) if principal is not None else None
            first = state if wants_state else scoped
            after = kwargs.pop("after", None) if reads is not None else None

            def run():
                if after:  # on the thread pool: the wait blocks a worker thread, never the event loop
                    scoped.reach(kwargs["agent"], after, reads, kwargs.get("discussion"))
                return handler(first, **kwargs)

            try:
                result = await run_in_threadpool(run)
            except Exception as exc:
                refused = translate(exc)
                if refused is None:
                    raise  # the app's handler answers 500 and logs it
                raise refused from None
            if scoped is not None and type(result).__name__ == "Job":
                scoped.started(result)  # who may follow the job (on every replica of this server)
            return json_response(result, status)

        query = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in visible]
        if reads is not None:
            query.append(inspect.Parameter("after", inspect.Parameter.KEYWORD_ONLY, annotation=str | None,
                                           default=Query(None, description=AFTER_DOC, max_length=4096)))
        # FastAPI builds the route's parameters from this signature; typeshed's functions declare no `__signature__`.
        endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)] + query)
        endpoint.__name__ = handler.__name__
        extra: dict = {"security": security(access)}
        if body is not None:
            extra["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref(body)}}}
        responses = error_responses(*errors, *(("lagging",) if reads is not None else ()),
                                    *(("unknown_agent",) if access == "agent" else ()),
                                    *(("forbidden",) if access == "home" else ()))
        if response is not None:
            responses[status] = {"description": "OK", "content": {"application/json": {"schema": ref(response)}}}
        router.add_api_route(path, endpoint, methods=[method], status_code=status, response_class=Response,
                             summary=summary or (handler.__doc__ or "").strip().splitlines()[0] or None,
                             description=(inspect.cleandoc(handler.__doc__ or "") + "\n\n" + ACCESS_NOTES[access]).strip(),
                             responses=responses,
                             openapi_extra=extra or None, name=handler.__name__)
        return handler

    return register


# OpenAI's error `type` by status: what the `openai` SDK and front-ends built for it expect beside code and message.
OPENAI_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 409: "invalid_request_error", 413: "invalid_request_error",
                415: "invalid_request_error", 422: "invalid_request_error", 429: "rate_limit_error"}


def error_body(exc: ApiError) -> dict:
    """`{"error": {"code", "message", "type"}}`: engram's stable code and what to fix, with OpenAI's error type so
    that OpenAI clients read it as they read OpenAI's own errors (and OpenAI's `param`, the field refused, when the
    refusal is about one)."""
    kind = OPENAI_TYPES.get(exc.status, "server_error" if exc.status >= 500 else "invalid_request_error")
    body = {"code": exc.code, "message": exc.message, "type": kind}
    if exc.param is not None:
        body["param"] = exc.param
    return {"error": body}


OLLAMA_PATHS = "/api/"  # the Ollama-compatible front door (engram.server.ollama): Ollama's error shape


def error_response(exc: ApiError, path: str = "") -> Response:
    """The refusal as JSON: engram's (and OpenAI's) shape, or on an Ollama route (`path` under /api/) Ollama's
    `{"error": "<message>"}` (and 400 where engram says 422), which the ollama client raises as
    `ResponseError(error, status)`."""
    if path.startswith(OLLAMA_PATHS):  # Ollama answers a request it cannot take with 400, never 422
        body, status = {"error": exc.message}, 400 if exc.status == 422 else exc.status
    else:
        body, status = error_body(exc), exc.status
    response = json_response(body, status)
    if exc.retry_after is not None:
        response.headers["Retry-After"] = str(max(1, round(exc.retry_after)))
    return response


_STATE_LOCK = threading.Lock()


def ensure_state(state) -> None:
    """Build the app's api, identity and shutdown on first use when a `factory` was given instead (a Ray Serve
    replica: the app travels to the replica by value, so its state is made there)."""
    if state.api is None and state.factory is not None:
        with _STATE_LOCK:
            if state.api is None:
                state.api, state.identity, state.shutdown = state.factory()
                state.keys = KeyRing(Path(state.identity.home))

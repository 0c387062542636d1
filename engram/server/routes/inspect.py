"""The web inspector, served: `GET /inspect?agent=A[&discussion=D]` (the page), `GET /inspect` (the agents),
`GET /inspect/api/<view>?agent=A&…` (what the page asks while you look), `GET /inspect/assets/plotly-<v>.min.js`.

Everything is answered by `engram.inspect.web.respond` over an `EngramReader` of this server's own `Api`:
SQL through the runtime's confined query, recall with `record=False`, so looking at memory never changes it.
Protected as every agent-scoped route: the request's principal must be allowed the agent it names (the same
`unknown_agent` answer as for an agent that does not exist), and the list of agents shows only its own.
The page is HTML, not an operation of the API: it is left out of the OpenAPI document.

A browser cannot send a bearer key: with API keys configured, `GET /inspect/login` is a form that takes one and
sets an HttpOnly, SameSite=Strict session cookie scoped to `/inspect` and to the key's agents
(`engram.server.sessions` has the details); a page asked for without key or session redirects there, a view
answers 401. `POST /inspect/logout` ends the session. Both POSTs are accepted from this server's own pages only.
"""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import State

from engram.api.errors import error
from engram.api.service import Api
from engram.server import auth
from engram.server.endpoint import ensure_state, error_response
from engram.server.sessions import COOKIE, OWNER_ID, SESSION_SECONDS, Session, Sessions, same_origin

if TYPE_CHECKING:
    from engram.inspect.web import Response as Answer  # the inspector's answer, made into an HTTP response here

router = APIRouter(tags=["inspector"])
MOUNT = "/inspect"


def _answer(api: Api, path: str, query: str, principal: auth.Principal) -> Answer:
    from engram.inspect.adapter import EngramReader
    from engram.inspect.web import respond

    scoped = api.scoped(principal)  # the API as this principal sees the home (engram.api.access)
    agent = dict(parse_qsl(query, keep_blank_values=True)).get("agent")
    if agent:
        principal.require(agent)
        if path.startswith(MOUNT + "/api/") or path.rstrip("/") == MOUNT:
            scoped.require_agent(agent)  # an agent the home does not know: 404 unknown_agent, as everywhere else
    return respond(EngramReader(scoped, scoped.config), path, query, home=str(scoped.home.root), mount=MOUNT,
                   may=principal.may)


async def _ready(request: Request) -> State:
    state: State = request.app.state
    if state.api is None:
        await run_in_threadpool(ensure_state, state)
    return state


def _sessions(state: State) -> Sessions:
    sessions = getattr(state, "sessions", None)
    if sessions is None:
        sessions = state.sessions = Sessions(Path(state.identity.home))
    return sessions


def _keys_configured(state: State) -> bool:
    return state.keys is not None and state.keys.configured()


def _owner_id(state: State) -> str:
    """The key id of a session opened with this server process's instance token (valid while that process runs)."""
    import hashlib

    token = state.identity.token
    return f"{OWNER_ID}-{hashlib.sha256(token.encode()).hexdigest()[:16]}"


def _session(request: Request) -> Session | None:
    return _sessions(request.app.state).check(request.cookies.get(COOKIE), time.time())


def _principal(request: Request) -> auth.Principal | None:
    """Who asks: a key in the headers, else a valid session cookie; None when neither (with keys configured)."""
    state = request.app.state
    if not _keys_configured(state) or auth.presented_key(request.headers):
        return auth.authenticate(request)
    session = _session(request)
    if session is None:
        return None
    if session.key_id == _owner_id(state):
        return auth.OWNER
    stored = state.keys.by_id(session.key_id)
    if stored is None:  # revoked since the login
        return None
    return auth.Principal(f"key {stored.id} (browser session)", None if stored.every_agent else frozenset(stored.agents))


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def _with_logout(body: bytes) -> bytes:
    form = (f'<form method="post" action="{MOUNT}/logout" style="position:fixed;top:6px;right:8px;margin:0">'
            '<button type="submit">Log out</button></form>')
    return body.replace(b"</body>", form.encode() + b"</body>", 1)


async def _serve(request: Request) -> Response:
    state = await _ready(request)
    principal = _principal(request)
    path = request.url.path
    if principal is None:
        if path.rstrip("/") == MOUNT:  # a browser opening the page: log in first, then come back
            back = path + (f"?{request.url.query}" if request.url.query else "")
            return Response(status_code=303, headers={"Location": f"{MOUNT}/login?next={quote(back, safe='')}",
                                                      "Cache-Control": "no-store"})
        raise error("unauthorized", "this server needs an API key: send it as `Authorization: Bearer <key>`, or log "
                    f"in at {MOUNT}/login in a browser")
    answer = await run_in_threadpool(_answer, state.api, path, request.url.query, principal)
    body = answer.body
    if answer.content_type.startswith("text/html") and _keys_configured(state) and not auth.presented_key(
            request.headers):
        body = _with_logout(body)
    return Response(body, status_code=answer.status, media_type=answer.content_type,
                    headers={"Cache-Control": answer.cache})


def _safe_next(value: str | None) -> str:
    """Where to go after logging in: a page of the inspector on this server, nothing else (no open redirect). A value
    that no Location header can carry (a line break, a character outside printable ASCII) is refused."""
    if value and not (value.isascii() and value.isprintable()):
        raise error("invalid_request", "next must be a path of the inspector in printable ASCII (URL-encoded), "
                    "without line breaks")
    if value and value.startswith(MOUNT) and not value.startswith("//") and "\\" not in value:
        return value
    return MOUNT


def _login_page(next_url: str, message: str = "", status: int = 200) -> Response:
    note = f'<p role="alert" style="color:#b00">{html.escape(message)}</p>' if message else ""
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>engram inspector: log in</title></head>'
        '<body><h1>engram inspector</h1><p>This server needs an API key (<code>engram keys add --agents …</code> makes '
        f'one). You will see the agents the key may touch.</p>{note}'
        f'<form method="post" action="{MOUNT}/login"><label>API key <input type="password" name="key" '
        'autocomplete="current-password" required autofocus></label>'
        f'<input type="hidden" name="next" value="{html.escape(next_url)}"> <button type="submit">Log in</button>'
        '</form></body></html>')
    return Response(page.encode(), status_code=status, media_type="text/html; charset=utf-8",
                    headers={"Cache-Control": "no-store"})


def _cross_site() -> Response:
    return error_response(error("forbidden", "this form is accepted from the inspector's own pages only "
                                "(Origin/Referer of another site, or none)"))


@router.get(MOUNT + "/login", include_in_schema=False)
async def login_form(request: Request) -> Response:
    state = await _ready(request)
    next_url = _safe_next(request.query_params.get("next"))
    if not _keys_configured(state):  # nothing to log in to: loopback only, every agent
        return Response(status_code=303, headers={"Location": next_url})
    return _login_page(next_url)


@router.post(MOUNT + "/login", include_in_schema=False)
async def login(request: Request) -> Response:
    import hmac

    state = await _ready(request)
    if not same_origin(request.headers, _secure(request)):
        return _cross_site()
    form = dict(parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))
    next_url = _safe_next(form.get("next"))
    if not _keys_configured(state):
        return Response(status_code=303, headers={"Location": next_url})
    key = form.get("key", "").strip()
    token = state.identity.token
    if token and key and hmac.compare_digest(key.encode(), token.encode()):
        key_id = _owner_id(state)
    else:
        stored = state.keys.find(key)
        if stored is None:
            return _login_page(next_url, "That is not a valid API key (mistyped, or revoked).", 401)
        key_id = stored.id
    value, _ = _sessions(state).issue(key_id, time.time())
    response = Response(status_code=303, headers={"Location": next_url, "Cache-Control": "no-store"})
    response.set_cookie(COOKIE, value, max_age=SESSION_SECONDS, path=MOUNT, httponly=True, samesite="strict",
                        secure=_secure(request))
    return response


@router.post(MOUNT + "/logout", include_in_schema=False)
async def logout(request: Request) -> Response:
    state = await _ready(request)
    if not same_origin(request.headers, _secure(request)):
        return _cross_site()
    session = _session(request)
    if session is not None:
        _sessions(state).revoke(session, time.time())
    response = Response(status_code=303, headers={"Location": f"{MOUNT}/login", "Cache-Control": "no-store"})
    response.delete_cookie(COOKIE, path=MOUNT, httponly=True, samesite="strict", secure=_secure(request))
    return response


@router.get(MOUNT, include_in_schema=False)
async def page(request: Request) -> Response:
    return await _serve(request)


@router.get(MOUNT + "/", include_in_schema=False)
async def page_slash(request: Request) -> Response:
    return await _serve(request)


@router.get(MOUNT + "/api/{view}", include_in_schema=False)
async def view(request: Request, view: str) -> Response:
    return await _serve(request)


@router.get(MOUNT + "/assets/{name}", include_in_schema=False)
async def asset(request: Request, name: str) -> Response:
    return await _serve(request)

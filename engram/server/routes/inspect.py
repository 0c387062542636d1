"""The web inspector, served: `GET /inspect?agent=A[&discussion=D]` (the page), `GET /inspect` (the agents),
`GET /inspect/api/<view>?agent=A&…` (what the page asks while you look), `GET /inspect/assets/plotly-<v>.min.js`.

Everything is answered by `engram.inspect.web.respond` over an `EngramReader` of this server's own `Api`:
SQL through the runtime's confined query, recall with `record=False`, so looking at memory never changes it.
Protected as every agent-scoped route: the request's principal must be allowed the agent it names (the same
`unknown_agent` answer as for an agent that does not exist), and the list of agents shows only its own.
The page is HTML, not an operation of the API: it is left out of the OpenAPI document.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from engram.server import auth

router = APIRouter(tags=["inspector"])
MOUNT = "/inspect"


def _answer(api, path: str, query: str, principal: auth.Principal):
    from engram.inspect.adapter import EngramReader
    from engram.inspect.web import respond

    agent = dict(parse_qsl(query, keep_blank_values=True)).get("agent")
    if agent:
        principal.require(agent)
        if path.startswith(MOUNT + "/api/") or path.rstrip("/") == MOUNT:
            api.require_agent(agent)  # an agent the home does not know: 404 unknown_agent, as everywhere else
    return respond(EngramReader(api, api.config), path, query, home=str(api.home.root), mount=MOUNT, may=principal.may)


async def _serve(request: Request) -> Response:
    principal = auth.authenticate(request)
    state = request.app.state
    if state.api is None:
        from engram.server.app import ensure_state

        await run_in_threadpool(ensure_state, state)
    answer = await run_in_threadpool(_answer, state.api, request.url.path, request.url.query, principal)
    return Response(answer.body, status_code=answer.status, media_type=answer.content_type,
                    headers={"Cache-Control": answer.cache})


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

"""`GET /v1/events`: Server-Sent Events of what the log records, as it happens (`engram.api.events`).

Scoped by key: a key limited to agents receives only their events (another agent's events, and its name, never
reach it; asking for one is answered as for an agent that does not exist); the home's owner and admin keys see all.
"""

from __future__ import annotations

from typing import Annotated, Iterator

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from engram.api.errors import ApiError, error
from engram.api.events import DEFAULT_BUFFER, parse_cursor, stream
from engram.kernel.ids import InvalidIdError, validate_agent
from engram.server.auth import authenticate
from engram.server.endpoint import ensure_state, error_response, error_responses

router = APIRouter(tags=["events"])
KEEPALIVE_S = 15.0
MAX_TYPES = 64


async def events(request: Request,
                 agent: Annotated[list[str] | None, Query(description="only these agents' events (repeatable)")] = None,
                 type: Annotated[list[str] | None, Query(description="only events of these types (repeatable), "
                                                                     "e.g. MessageAppended, TraceEncoded")] = None,
                 after: Annotated[str | None, Query(description="start after this position (an event's `id`); "
                                                              "default: from now on. Last-Event-ID wins")] = None,
                 follow: Annotated[bool, Query(description="false: the events up to now, then a `caught-up` "
                                                           "event and the end")] = True) -> Response:
    """Server-Sent Events of what the log records as it happens: every event after a position (an earlier event's
    `id`, or `Last-Event-ID` on a reconnect), of the key's agents (filtered by `agent` and `type`), in log order.
    Each event's name is its type, its id the position after it, its data the log's row (`payload` as recorded).
    A comment line every 15 s keeps the connection alive; a subscriber too slow to keep up gets a final `cut`
    event with the position to resume from."""
    state = request.app.state
    try:
        if state.api is None:
            await run_in_threadpool(ensure_state, state)
        principal = authenticate(request)
        wanted = None
        if agent:
            try:
                wanted = frozenset(validate_agent(a) for a in agent)
            except InvalidIdError as exc:
                raise error("invalid_id", str(exc)) from None
            for a in sorted(wanted):
                principal.require(a)
        elif principal.agents is not None:
            wanted = principal.agents
        if type is not None and len(type) > MAX_TYPES:
            raise error("invalid_request", f"at most {MAX_TYPES} event types")
        feed = state.api.event_feed()
        position = parse_cursor(request.headers.get("last-event-id") or after, feed.shards())
    except ApiError as exc:
        return error_response(exc)
    frames = stream(feed, after=position, agents=wanted, types=frozenset(type) if type else None,
                    buffer=DEFAULT_BUFFER, keepalive_s=KEEPALIVE_S, follow=follow)

    def sse() -> Iterator[str]:
        yield "retry: 2000\n\n"
        for name, ident, data in frames:
            if not name:
                yield ": keep-alive\n\n"
            else:
                yield f"event: {name}\nid: {ident}\ndata: {data}\n\n"

    return StreamingResponse(sse(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


router.add_api_route(
    "/v1/events", events, methods=["GET"], name="events",
    summary="Subscribe to what the log records (Server-Sent Events)", description=events.__doc__,
    responses={200: {"description": "an event stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
               **error_responses("invalid_id", "invalid_request", "unknown_agent", "unauthorized")})

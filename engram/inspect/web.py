"""The inspector over HTTP, independent of any web framework: a server hands each GET under its mount point
(`/inspect` by default) to `respond` and sends back what it returns.

    GET /inspect?agent=A[&discussion=D]     the page (without `agent`: the home's agents, each a link)
    GET /inspect/api/<view>?agent=A&…        a view's answer as JSON
    GET /inspect/assets/plotly-<version>.min.js   Plotly as the `plotly` package ships it (cached by the browser)

A refusal is the server's JSON error, `{"error": {"code", "message"}}`: 400 `invalid_id` (an unsafe id),
422 `invalid_request` (a bad view, parameter or value), 404 `not_found` (nothing there). engram's server
mounts this at `/inspect` (`engram.server.routes.inspect`), after its own access check.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Callable
from urllib.parse import parse_qsl, quote, urlencode

from engram.inspect.api import BadId, InspectError, Inspector, NotFound
from engram.inspect.page import plotly_bytes, plotly_version, served_html
from engram.inspect.source import MemoryReader
from engram.kernel.ids import InvalidIdError

MOUNT = "/inspect"


IMMUTABLE = "public, max-age=31536000, immutable"  # a versioned asset: its URL changes with its content


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes
    cache: str = "no-store"  # the Cache-Control a server sends: memory changes, so answers are never reused


def plotly_path(mount: str = MOUNT) -> str:
    return f"{mount.rstrip('/')}/assets/plotly-{plotly_version()}.min.js"


def _json(status: int, data: dict) -> Response:
    return Response(status, "application/json", json.dumps(data, ensure_ascii=False, default=str).encode())


def page_url(server: str, agent: str, discussion: str | None = None, *, mount: str = MOUNT) -> str:
    """The inspector page of an agent (and a discussion) on the server at `server` (e.g. http://127.0.0.1:8765)."""
    return f"{server.rstrip('/')}{mount}?" + urlencode({"agent": agent, **({"discussion": discussion} if discussion else {})})


def _error(status: int, code: str, message: str) -> Response:
    return _json(status, {"error": {"code": code, "message": message}})


def respond(reader: MemoryReader, path: str, query: str, *, home: str, mount: str = MOUNT,
            may: Callable[[str], bool] = lambda agent: True) -> Response:
    """The answer to `GET path?query` (path without the query string) — a fresh Inspector per request, so a
    long-lived server sees projection tables that appeared since the last one. `may(agent)`: whether the
    asker may see the agent (the list of agents shows only those; asking for another is the caller's to refuse
    before calling)."""
    params = dict(parse_qsl(query, keep_blank_values=True))
    inspector = Inspector(reader)
    api = mount.rstrip("/") + "/api/"
    plotly = plotly_path(mount)
    if path == plotly:
        return Response(200, "text/javascript; charset=utf-8", plotly_bytes(), cache=IMMUTABLE)
    try:
        if path.startswith(api):
            return _json(200, inspector.get(path[len(api):], params))
        if path.rstrip("/") == mount.rstrip("/"):
            agent = params.get("agent")
            if not agent:
                return Response(200, "text/html; charset=utf-8", _agents_page(reader, mount, may).encode())
            page = served_html(inspector, agent, params.get("discussion") or None, base=api.rstrip("/"), home=home,
                               plotly_src=plotly)
            return Response(200, "text/html; charset=utf-8", page.encode())
    except (InvalidIdError, BadId) as exc:
        return _error(400, "invalid_id", str(exc))
    except InspectError as exc:
        return _error(422, "invalid_request", str(exc))
    except NotFound as exc:
        return _error(404, "not_found", str(exc))
    return _error(404, "not_found", f"no such page: {path} (the inspector is at {mount}?agent=<agent>)")


def _agents_page(reader: MemoryReader, mount: str, may: Callable[[str], bool]) -> str:
    _, rows = reader.sql("SELECT agent, count(*) FROM events_raw GROUP BY agent ORDER BY agent")
    items = "".join(
        f'<li><a href="{mount}?agent={quote(a)}">{html.escape(a)}</a> ({n} events)</li>' for a, n in rows if may(a)
    ) or "<li>nothing has been recorded yet</li>"
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>engram inspector</title></head>"
            f"<body><h1>engram inspector</h1><p>Pick an agent:</p><ul>{items}</ul></body></html>")

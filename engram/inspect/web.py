"""The inspector over HTTP, independent of any web framework: a server hands each GET under its mount point
(`/inspect` by default) to `respond` and sends back what it returns.

    GET /inspect?agent=A[&discussion=D]     the page (without `agent`: the home's agents, each a link)
    GET /inspect/api/<view>?agent=A&…        a view's answer as JSON (400: bad request, 404: nothing there)
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote

from engram.ids import InvalidIdError
from engram.inspect.api import InspectError, Inspector, NotFound
from engram.inspect.page import served_html
from engram.inspect.source import MemoryReader

MOUNT = "/inspect"


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes


def _json(status: int, data: dict) -> Response:
    return Response(status, "application/json", json.dumps(data, ensure_ascii=False, default=str).encode())


def respond(reader: MemoryReader, path: str, query: str, *, home: str, mount: str = MOUNT) -> Response:
    """The answer to `GET path?query` (path without the query string) — a fresh Inspector per request, so a
    long-lived server sees projection tables that appeared since the last one."""
    params = dict(parse_qsl(query, keep_blank_values=True))
    inspector = Inspector(reader)
    api = mount.rstrip("/") + "/api/"
    try:
        if path.startswith(api):
            return _json(200, inspector.get(path[len(api):], params))
        if path.rstrip("/") == mount.rstrip("/"):
            agent = params.get("agent")
            if not agent:
                return Response(200, "text/html; charset=utf-8", _agents_page(reader, mount).encode())
            page = served_html(inspector, agent, params.get("discussion") or None, base=api.rstrip("/"), home=home)
            return Response(200, "text/html; charset=utf-8", page.encode())
    except (InspectError, InvalidIdError) as exc:
        return _json(400, {"detail": str(exc)})
    except NotFound as exc:
        return _json(404, {"detail": str(exc)})
    return _json(404, {"detail": f"no such page: {path}"})


def _agents_page(reader: MemoryReader, mount: str) -> str:
    _, rows = reader.sql("SELECT agent, count(*) FROM events_raw GROUP BY agent ORDER BY agent")
    items = "".join(
        f'<li><a href="{mount}?agent={quote(a)}">{html.escape(a)}</a> ({n} events)</li>' for a, n in rows
    ) or "<li>nothing has been recorded yet</li>"
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>engram inspector</title></head>"
            f"<body><h1>engram inspector</h1><p>Pick an agent:</p><ul>{items}</ul></body></html>")

"""The front door: one check of every request, on every route (REST, the OpenAI proxy, /mcp, the inspector),
before any of them runs. It stops what a key cannot: web pages in the user's browser and remote clients of a
home that has no key.

- **Host** must name this server: a loopback name (127.0.0.1, localhost, [::1]) with the server's own port, the
  host it was started on (`--host`, `server.host`), a name of `server.allowedHosts`, or, on a server bound to
  every interface (0.0.0.0, ::), an IP address. A page whose DNS name was rebound to 127.0.0.1 sends its own name
  and is refused (403), on reads too.
- **Origin** (and Fetch Metadata's `Sec-Fetch-Site`), when a browser sends them, must be this server's own: a page
  on another origin gets 403 for anything it asks, read or write, and no response grants CORS (there is no CORS
  middleware, so a preflight is refused as any cross-origin request is).
- **A POST** must say `Content-Type: application/json`, or carry a key header (`Authorization`, `X-API-Key`): the
  two things an HTML form or a "simple" cross-site request cannot send without a CORS preflight, which is
  refused (415 otherwise). PUT, PATCH and DELETE need no such rule: a browser never sends them cross-site
  without a preflight, so a curl `DELETE` without a body keeps its usual answer. The inspector's login and logout forms are the
  exception, with their own same-origin check (`engram.server.sessions.same_origin`).
- **No key, no remote client**: while the home has no API key (none was added, or the last one was revoked while
  the server ran), only loopback peers are served; any other peer gets 403, whatever interface the server was
  bound to. The listener stays open, so adding a key again serves remote clients again (with their keys).

Pure ASGI (it also guards `/mcp`, which is not a FastAPI route). A refusal is the app's JSON error.
"""

from __future__ import annotations

import ipaddress
from typing import Sequence
from urllib.parse import urlsplit

from engram.api.errors import ApiError, error

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
KEY_HEADERS = (b"authorization", b"x-api-key", b"api-key")
SIMPLE_WRITES = frozenset({"POST"})  # the one state-changing method a page may send cross-site without a preflight
FORM_POSTS = frozenset({"/inspect/login", "/inspect/logout"})  # same-origin checked by the route itself
SAME_SITE = frozenset({"same-origin", "none"})  # Sec-Fetch-Site values of the server's own pages and typed URLs


def split_host(value: str) -> tuple[str, int | None]:
    """`name[:port]` of a Host header or URL netloc -> (lower-case name without brackets, port or None)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:
        name, port = value, ""
    return name, int(port) if port.isdigit() else None


def is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback_peer(peer: str | None) -> bool:
    if peer is None:
        return True  # a Unix socket: this machine's
    try:
        return ipaddress.ip_address(peer.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class FrontDoor:
    """The checks of the module docstring, as ASGI middleware. `state`: the app's state (its `keys` says whether the
    home has keys now); `host`: what the server was started on; `allowed_hosts`: `server.allowedHosts`."""

    def __init__(self, app, *, state, host: str, allowed_hosts: Sequence[str] = ()):
        self.app, self.state = app, state
        self.host = split_host(host)[0] if host.startswith("[") else host.lower()
        self.allowed = frozenset(h.lower() for h in allowed_hosts)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        try:
            await self._check(scope)
        except ApiError as exc:
            from engram.server.endpoint import error_response

            return await error_response(exc, scope.get("path", ""))(scope, receive, send)
        return await self.app(scope, receive, send)

    async def _check(self, scope) -> None:
        headers = {k: v.decode("latin-1") for k, v in scope.get("headers") or ()}
        host = headers.get(b"host", "")
        if not self.host_allowed(host, (scope.get("server") or (None, None))[1]):
            raise error("forbidden", f"Host {host[:100]!r} is not a name of this server (a loopback name with its "
                        "port, the host it was started on, or server.allowedHosts in engram.json)")
        peer = (scope.get("client") or (None, None))[0]
        if not is_loopback_peer(peer) and not await self._keys_configured():
            raise error("forbidden", "this home has no API key (none was added, or the last one was revoked): the "
                        "server answers loopback clients only until `engram keys add` makes one")
        site = headers.get(b"sec-fetch-site")
        origin = headers.get(b"origin")
        if site is not None and site not in SAME_SITE:
            raise error("forbidden", f"a {site} request from a web page: engram answers its own pages only")
        if origin is not None and split_host(urlsplit(origin).netloc) != split_host(host):
            raise error("forbidden", f"Origin {origin[:100]!r} is not this server: engram answers no other origin "
                        "(and grants no CORS)")
        if scope["method"] not in SIMPLE_WRITES or scope["path"] in FORM_POSTS:
            return
        media = headers.get(b"content-type", "").split(";", 1)[0].strip().lower()
        json_body = media == "application/json" or (media.startswith("application/") and media.endswith("+json"))
        if not json_body and not any(h in headers for h in KEY_HEADERS):
            raise error("unsupported_media_type", f"{scope['method']} needs Content-Type: application/json (or an API "
                        "key header): what a form or a cross-site page cannot send")

    def host_allowed(self, host: str, server_port: int | None) -> bool:
        name, port = split_host(host)
        if not name:
            return False
        if name in LOOPBACK_NAMES:
            return port is None or server_port is None or port == server_port
        if name == self.host or name in self.allowed:
            return True
        return self.host in WILDCARD_HOSTS and is_ip(name)

    async def _keys_configured(self) -> bool:
        state = self.state
        if getattr(state, "keys", None) is None and getattr(state, "factory", None) is not None:
            from starlette.concurrency import run_in_threadpool

            from engram.server.endpoint import ensure_state

            await run_in_threadpool(ensure_state, state)
        ring = getattr(state, "keys", None)
        return ring is not None and ring.configured()

"""Who may touch which agents: the per-request hook of every route.

With no API key configured (`<home>/keys.json` empty or absent) the server listens on loopback only and
every request may touch every agent of the home. Once a key exists, every request needs one
(`Authorization: Bearer <key>`, or `X-API-Key: <key>`): a key maps to its agents (`engram keys add
--agents a,b`), or to every agent (`--agents '*'`, an admin key). The server's own instance token
(`instance.json`, 0600: readable only by the home's owner) counts as an admin key: it is how the CLI and
`engram.Client.for_home` keep working on a home with keys. It never leaves the home: no route sends it (a
command recognises its server by an HMAC of a challenge, `engram.server.instance.proof`).

What a principal may do is decided in one place, the API layer (`engram.api.access`): every route hands its
operation a `ScopedApi` of the request's principal. An agent a key may not touch is answered as an agent that does
not exist (404 unknown_agent): a key learns nothing about other keys' agents. Home-wide operations (status, replay,
export, shutdown) need an admin key (403 forbidden).
"""

from __future__ import annotations

import hmac

from engram.api.access import Principal
from engram.api.errors import error

__all__ = ["Principal", "LOOPBACK", "OWNER", "authenticate", "authenticate_headers", "principal_for", "presented_key"]

LOOPBACK = Principal("loopback")
OWNER = Principal("instance token")


def presented_key(headers) -> str | None:
    auth = headers.get("authorization")
    if auth and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return headers.get("x-api-key") or headers.get("api-key")


def authenticate(request) -> Principal:
    """The principal of a request (no keys configured: the loopback user, who may touch every agent)."""
    return authenticate_headers(request.app.state, request.headers)


def authenticate_headers(state, headers) -> Principal:
    """The principal of a request with these `headers` (lower-case names) on the app whose state is `state`."""
    ring = getattr(state, "keys", None)
    if ring is None or not ring.configured():
        return LOOPBACK
    key = presented_key(headers)
    if not key:
        raise error("unauthorized", "this server needs an API key: send it as `Authorization: Bearer <key>` "
                    "(`engram keys add --agents …` makes one)")
    if not (key.isascii() and key.isprintable()):  # keys are `ek-…` (ASCII); a header may carry any byte
        raise error("unauthorized", "the API key is not valid (an engram key is printable ASCII: `ek-…`)")
    token = state.identity.token if state.identity is not None else None
    if token and hmac.compare_digest(key.encode(), token.encode()):
        return OWNER
    stored = ring.find(key)
    if stored is None:
        raise error("unauthorized", "the API key is not valid (mistyped, or revoked: `engram keys list` shows the "
                    "keys by id)")
    return Principal(f"key {stored.id}", None if stored.every_agent else frozenset(stored.agents))


def principal_for(state, headers) -> Principal:
    """As `authenticate_headers`, for headers of any case (an MCP tool call's request)."""
    return authenticate_headers(state, {str(k).lower(): v for k, v in dict(headers).items()})

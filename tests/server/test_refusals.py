"""Malformed requests are refused with a 4xx and a JSON error, never a 500 (issue 21, finding 10); MCP's tools have
REST's bounds, and an MCP resource that does not exist answers REST's not-found error.

The app is served from the test process (uvicorn on 127.0.0.1) over the in-process runtime.
"""

from __future__ import annotations

import asyncio
import http.client
import json
from urllib.parse import urlsplit

import pytest

from engram.api import types as t

pytestmark = pytest.mark.server

AGENT = "ada"
DISCUSSION = "trip"
MAX_BODY = 256 * 1024


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    home = tmp_path_factory.mktemp("refusals") / "home"
    home.mkdir()
    mem = Engram(InProcessRuntime(load_service_config(home), groups=["summarizer", "traces"]).start())
    mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[t.Message(role="user", content="I live in Porto.")]))
    with Served(mem, max_body_bytes=MAX_BODY) as server:
        yield server
    mem.close()


def send(served, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
         chunks: list[bytes] | None = None) -> tuple[int, dict]:
    parts = urlsplit(served.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        if chunks is not None:
            conn.request(method, path, body=iter(chunks), headers={"Content-Type": "application/json", **(headers or {})},
                         encode_chunked=True)
        else:
            conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else {}
    finally:
        conn.close()


def head(served) -> int:
    return sum(served.api.rt.heads().values())


def test_a_chunked_body_over_the_limit_is_refused_with_413_and_nothing_appended(served):
    before = head(served)
    piece = b"x" * (64 * 1024)
    status, body = send(served, "POST", f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages",
                        chunks=[b'{"messages": [{"role": "user", "content": "'] + [piece] * 8 + [b'"}]}'])
    assert (status, body["error"]["code"]) == (413, "body_too_large")
    assert f"over {MAX_BODY} bytes" in body["error"]["message"]
    assert head(served) == before


def test_a_deeply_nested_body_is_refused_as_invalid(served):
    nested = b'{"nodes": [{"type": "Standard", "params": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}"
    status, body = send(served, "POST", f"/v1/agents/{AGENT}/workflows/run", nested)
    assert (status, body["error"]["code"]) == (422, "invalid_request")
    assert "nested too deeply" in body["error"]["message"]
    status, body = send(served, "POST", "/v1/chat/completions", b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    assert (status, body["error"]["code"]) == (422, "invalid_request")


@pytest.mark.parametrize("path", [
    f"/v1/agents/{AGENT}/traces?limit=100000000000000000000000",
    f"/v1/agents/{AGENT}/traces?limit=1e23",
    f"/v1/agents/{AGENT}/consolidations?limit=100000000000000000000000",
    f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/recent-observations?limit=100000000000000000000000",
    f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/memories?last=100000000000000000000000",
    f"/v1/agents/{AGENT}/traces?limit=-1",
])
def test_a_count_out_of_range_is_refused_as_invalid(served, path):
    status, body = send(served, "GET", path)
    assert (status, body["error"]["code"]) == (422, "invalid_request"), body
    name = path.split("?")[1].split("=")[0]
    assert body["error"]["message"].startswith(f"query.{name}: Input should be"), body


def test_the_api_bounds_counts_for_every_interface(served):
    from engram.api.errors import ApiError

    with pytest.raises(ApiError, match="limit must be a number from 1 to 1000000, got 1000000000"):
        served.api.traces(AGENT, limit=10 ** 9)
    with pytest.raises(ApiError, match="last must be a number from 1 to 1000000, got 0"):
        served.api.memories(AGENT, DISCUSSION, last=0)


def test_a_line_break_or_non_ascii_in_the_inspectors_next_is_refused(served):
    for value in ("/inspect%0d%0aSet-Cookie:%20x=1", "/inspect/%C3%A9"):
        status, body = send(served, "GET", f"/inspect/login?next={value}")
        assert (status, body["error"]["code"]) == (422, "invalid_request"), value
        assert "next must be a path of the inspector" in body["error"]["message"]
    parts = urlsplit(served.url)
    status, _ = send(served, "GET", "/inspect/login?next=/inspect/%3Ftab%3Dgraph")
    assert status == 303  # no keys: straight back to where it was going


def test_a_non_ascii_key_in_the_login_form_is_refused_not_a_500(served):
    from engram.server.keys import add_key, revoke_key

    _, stored = add_key(served.home, ("alice",))
    try:
        form = "key=%C3%A9&next=/inspect".encode()
        status, _ = send_form(served, form)
        assert status == 401
    finally:
        revoke_key(served.home, stored.id)


def send_form(served, form: bytes) -> tuple[int, bytes]:
    parts = urlsplit(served.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request("POST", "/inspect/login", body=form, headers={
            "Content-Type": "application/x-www-form-urlencoded", "Origin": served.url})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def mcp_session(served, work):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def run():
        transport = streamable_http_client(served.url + "/mcp", http_client=httpx2.AsyncClient(timeout=120))
        async with Client(transport) as client:
            return await work(client)

    return asyncio.run(run())


@pytest.mark.parametrize("limit", [-1, 0, 10 ** 9])
def test_mcp_tools_refuse_the_limits_rest_refuses(served, limit):
    status, body = send(served, "POST", f"/v1/agents/{AGENT}/recall",
                        json.dumps({"query": "Porto", "limit": limit}).encode())
    assert status == 422  # REST

    async def work(client):
        return [await client.call_tool("recall", {"agent": AGENT, "query": "Porto", "limit": limit}),
                await client.call_tool("search", {"agent": AGENT, "discussion": DISCUSSION, "keywords": "Porto",
                                                  "limit": limit})]

    for result in mcp_session(served, work):
        assert result.is_error, result
        assert "limit" in result.content[0].text


def test_the_mcp_backend_checks_the_requests_bounds_itself(served):
    from engram.api.errors import ApiError
    from engram.mcp.backends import ApiBackend
    from engram.server.auth import LOOPBACK

    backend = ApiBackend(served.api, LOOPBACK)
    with pytest.raises(ApiError, match="RecallRequest: Expected `int` >= 1"):
        backend.recall(AGENT, "Porto", None, -1)
    with pytest.raises(ApiError, match="SearchRequest: Expected `int` <= 1000"):
        backend.search(AGENT, DISCUSSION, "Porto", "keyword", 10 ** 9)


def test_an_mcp_resource_of_an_unknown_discussion_answers_rests_not_found(served):
    from mcp import MCPError

    status, rest = send(served, "GET", f"/v1/agents/{AGENT}/discussions/no-such-trip/summary")
    assert status == 404

    async def work(client):
        with pytest.raises(MCPError) as caught:
            await client.read_resource(f"engram://agents/{AGENT}/discussions/no-such-trip/summary")
        return caught.value

    refused = mcp_session(served, work)
    assert str(refused.error.message) == f"{rest['error']['code']}: {rest['error']['message']}"

"""The same app deployed as a Ray Serve application on a local Ray instance answers the REST checks."""

from __future__ import annotations

import json
import os

import pytest

from engram.api import types as t
from engram.api.errors import ApiError
from tests.server.test_rest import AGENT, DISCUSSION, REFUSALS, request, sample_conversations

pytestmark = [pytest.mark.ray, pytest.mark.server]


class _Url:
    def __init__(self, url):
        self.url = url


def test_the_app_on_ray_serve_answers_the_rest_checks(ray_session, tmp_path):
    from engram.client import Client
    from engram.config.service import load_service_config
    from engram.boot import ray_serve

    from tests.api.test_webhooks import SECRET, StandInReceiver, wait_for

    home = tmp_path / "home"
    home.mkdir()
    receiver = StandInReceiver()
    (home / "engram.json").write_text(json.dumps({"server": {"replicas": 2},  # two replicas, one log
                                                  "webhooks": [{"url": receiver.url, "secret": SECRET}]}))
    config = load_service_config(home)
    url = ray_serve.deploy(config, home, "token-1", host="127.0.0.1", port=ray_serve.free_port("127.0.0.1"),
                           owner_pid=os.getpid())
    try:
        with Client(url) as client:
            health = client.server_info()
            assert health.home == str(home) and health.runtime.startswith("Ray Serve")
            assert client.health().status == "up" and "token-1" not in str(client.health())
            res = client.append_conversations(AGENT, sample_conversations())
            assert res.results[0].appended == 45
            assert client.wait_idle(timeout=300)
            # Webhooks under Ray Serve: the memory made of the conversation is POSTed, each change once (the
            # deploying process delivers them, not each of the two replicas).
            made = lambda: [e for e in receiver.events() if e["event"] == "memory.created" and e["agent"] == AGENT]
            assert wait_for(lambda: made(), timeout=60), receiver.posts[:3]
            assert len(receiver.posts) == len(receiver.events())  # no delivery twice
            recalled = client.recall(AGENT, "Which CSS approach does Priya dislike?", discussion=DISCUSSION, limit=3)
            assert isinstance(recalled, t.RecallResponse) and len(recalled.hits) == 3
            assert client.search(AGENT, DISCUSSION, "deadline", mode="keyword").hits
            with pytest.raises(ApiError) as refused:
                client.recall("nobody", "x")
            assert refused.value.code == "unknown_agent"
            head = client.status().shards[0].head
            for method, path, body, status, code in REFUSALS:
                payload = body if isinstance(body, str) or body is None else json.dumps(body)
                got, doc = request(_Url(url), method, path, payload, {"Content-Type": "application/json"} if payload else None)
                assert (got, doc["error"]["code"]) == (status, code), (path, doc)
            # Nothing appended by a refusal. The recall above records its retrieval after answering (TraceRetrieved,
            # and the working memory it updates), which a loaded machine may append while the refusals run.
            later = {kind for (kind,) in client.sql("SELECT DISTINCT type FROM events WHERE seq > ?", [head]).rows}
            assert later <= {"TraceRetrieved", "WorkingMemoryUpdated"}, later
            _, doc = request(_Url(url), "GET", "/openapi.json")
            assert "/v1/agents/{agent}/recall" in doc["paths"]
            proxy_and_mcp_checks(url, client)
    finally:
        ray_serve.stop(config)
        receiver.close()


def proxy_and_mcp_checks(url: str, client) -> None:
    """The OpenAI-compatible proxy (the official SDK, streaming and not, the whole history resent) and MCP's
    streamable HTTP, against the Ray Serve deployment."""
    import asyncio

    import openai
    from mcp import Client as McpClient

    from tests.server.test_mcp import http_transport, structured
    from tests.server.test_openai_proxy import AGENT as PROXY_AGENT
    from tests.server.test_openai_proxy import USER_TURNS, converse

    with openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0) as llm:
        history = converse(llm, stream=False, turns=USER_TURNS[:2])
        history = converse(llm, stream=True, turns=USER_TURNS[2:4], history=history)
        rows = client.sql("SELECT role, content FROM messages WHERE discussion_id = 'trip-planning' ORDER BY seq").rows
        assert [tuple(r) for r in rows] == [(m["role"], m["content"]) for m in history if m["role"] != "system"]
        # Forgotten through whichever replica answers, then the whole history resent through whichever answers:
        # each message is in the log once (a replica's view of the discussion is checked against the log).
        assert client.wait_idle(timeout=300)
        forgotten = client.wait_job(client.forget(PROXY_AGENT, "trip-planning").id, timeout=300)
        assert forgotten.state == "succeeded", forgotten.error
        history = converse(llm, stream=True, turns=USER_TURNS[4:5], history=history)
    rows = client.sql("SELECT role, content FROM messages WHERE discussion_id = 'trip-planning' ORDER BY seq").rows
    assert [tuple(r) for r in rows] == [(m["role"], m["content"]) for m in history if m["role"] != "system"]

    async def session():
        async with McpClient(http_transport(f"{url}/mcp")) as mcp:
            tools = {t.name for t in (await mcp.list_tools()).tools}
            recalled = await mcp.call_tool("recall", {"agent": AGENT, "query": "Which CSS approach does Priya dislike?"})
            return tools, recalled

    tools, recalled = asyncio.run(session())
    assert {"remember", "recall"} <= tools and structured(recalled)["hits"]

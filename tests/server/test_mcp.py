"""engram over MCP, driven by the official `mcp` client: streamable HTTP at `/mcp` and `engram mcp` over stdio.

The home is served from the test process over the in-process runtime (real DuckDB, policies, embedder; the
labelled offline LLM); `engram mcp` runs as a subprocess and reaches that server as every command does.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

AGENT = "ada"
DISCUSSION = "family"
FACT = "My sister Ines is a vegetarian and lives in Porto."
TOOLS = {"remember", "recall", "search", "working_memory", "write_working_memory", "forget"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from tests.server.helpers import served_home

    home = tmp_path_factory.mktemp("mcp") / "home"
    home.mkdir()
    with served_home(home, groups=["summarizer", "auto-ingest", "traces", "working-memory"]) as mem:
        yield mem, home


def http_transport(url: str, key: str | None = None):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=120))


async def remember_and_recall(client) -> tuple[set[str], dict, dict]:
    tools = {t.name for t in (await client.list_tools()).tools}
    remembered = await client.call_tool("remember", {"agent": AGENT, "discussion": DISCUSSION, "content": FACT})
    recalled = await client.call_tool("recall", {"agent": AGENT, "query": "Where does Ines live?", "limit": 3})
    return tools, remembered, recalled


def structured(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


def test_an_mcp_client_remembers_and_recalls_over_streamable_http(served):
    from mcp import Client

    mem, home = served
    url = json.loads((home / "instance.json").read_text())["url"] + "/mcp"

    async def session():
        async with Client(http_transport(url)) as client:
            tools, remembered, recalled = await remember_and_recall(client)
            summary = await client.read_resource(f"engram://agents/{AGENT}/discussions/{DISCUSSION}/summary")
            return tools, remembered, recalled, summary

    tools, remembered, recalled, summary = asyncio.run(session())
    assert TOOLS <= tools
    assert structured(remembered)["results"][0]["discussion"] == DISCUSSION
    hits = structured(recalled)["hits"]
    assert any("Porto" in h["content"] for h in hits)
    assert json.loads(summary.contents[0].text)["discussion"] == DISCUSSION
    _, rows = mem.sql("SELECT content FROM messages WHERE discussion_id = ?", [DISCUSSION])
    assert [r[0] for r in rows].count(FACT) == 1


def test_engram_mcp_over_stdio_remembers_and_recalls_through_the_homes_server(served):
    from mcp import Client, StdioServerParameters

    mem, home = served
    engram = Path(sys.executable).with_name("engram")
    params = StdioServerParameters(command=str(engram), args=["--home", str(home), "mcp"])

    async def session():
        async with Client(params) as client:
            tools, remembered, recalled = await remember_and_recall(client)
            working = await client.call_tool("write_working_memory", {"agent": AGENT, "markdown": "- Ines: vegetarian"})
            notes = await client.call_tool("working_memory", {"agent": AGENT})
            refused = await client.call_tool("recall", {"agent": "not an id", "query": "x"})
            return tools, remembered, recalled, working, notes, refused

    tools, remembered, recalled, working, notes, refused = asyncio.run(session())
    assert TOOLS <= tools
    assert structured(remembered)["agent"] == AGENT
    assert any("Porto" in h["content"] for h in structured(recalled)["hits"])
    assert structured(working)["characters"] > 0
    assert "Ines: vegetarian" in structured(notes)["markdown"]
    assert refused.is_error and "invalid_id" in refused.content[0].text

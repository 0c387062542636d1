"""Read your writes over MCP, on real Ray actors (memory created in the background, as `engram serve` runs it):
`remember` then `recall` in one MCP session finds the memory on the first call, every time, while other writers
keep ingesting; a caller that wrote nothing is not made to wait for them."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path

import pytest

from engram.api import types as t
from engram.evaluation.unique_facts import fact

pytestmark = [pytest.mark.ray, pytest.mark.server]

AGENT = "ada"
ROUNDS = 100


@pytest.fixture(scope="module")
def served(ray_session, tmp_path_factory):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.ray_runtime import RayRuntime
    from tests.server.helpers import Served

    home = tmp_path_factory.mktemp("ryw") / "home"
    home.mkdir()
    mem = Engram(RayRuntime(load_service_config(home)).start())
    # The policy actors start (and load the embedder) at the first write: a read in the first seconds of a new
    # server may answer 503 lagging while they start. The rounds measure a running server.
    mem.append_messages(AGENT, "warm-up", t.AppendRequest(messages=[t.Message(role="user", content="Hello.")]))
    mem.wait_idle()
    try:
        with Served(mem) as served:
            yield mem, served
    finally:
        mem.close()


class Ingest:
    """Another writer appending to other discussions of the same agent (its shard and its auto-ingest) meanwhile, at
    a steady rate memory creation keeps up with (4 messages every half second)."""

    def __init__(self, mem):
        self.mem, self.stop, self.appended = mem, threading.Event(), 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            batch = [t.Message(role="user", content=f"Background note {self.appended + k}: the weather in Porto is mild.")
                     for k in range(4)]
            self.mem.append_messages(AGENT, f"background-{self.appended % 3}", t.AppendRequest(messages=batch))
            self.appended += len(batch)
            self.stop.wait(0.5)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(60)


def found(result, word: str) -> bool:
    assert not result.is_error, result.content
    hits = (result.structured_content or json.loads(result.content[0].text))["hits"]
    return any(word in h["content"] for h in hits)


async def rounds(client, offset: int) -> list[int]:
    """The rounds whose first recall did not find the fact just remembered."""
    missed = []
    for i in range(offset, offset + ROUNDS):
        text, question, word = fact(i)
        remembered = await client.call_tool("remember", {"agent": AGENT, "discussion": f"lockers-{offset}",
                                                         "content": text})
        assert not remembered.is_error, remembered.content
        if not found(await client.call_tool("recall", {"agent": AGENT, "query": question, "limit": 5}),
                     word):
            missed.append(i)
    return missed


def test_remember_then_recall_over_streamable_http_finds_it_100_times_in_a_row_under_concurrent_ingest(served):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    mem, server = served

    async def session():
        transport = streamable_http_client(server.url + "/mcp", http_client=httpx2.AsyncClient(timeout=120))
        async with Client(transport) as client:
            return await rounds(client, 0)

    with Ingest(mem) as ingest:
        missed = asyncio.run(session())
    assert ingest.appended > 0
    assert missed == []


def test_remember_then_recall_over_stdio_finds_it_100_times_in_a_row_under_concurrent_ingest(served):
    from mcp import Client, StdioServerParameters

    mem, server = served
    engram = Path(sys.executable).with_name("engram")
    params = StdioServerParameters(command=str(engram), args=["--home", str(server.home), "mcp"])

    async def session():
        async with Client(params) as client:
            return await rounds(client, 100)

    with Ingest(mem) as ingest:
        missed = asyncio.run(session())
    assert ingest.appended > 0
    assert missed == []


def test_a_read_without_a_position_does_not_wait_for_other_writers(served):
    """The client that wrote waits for its memory; another client's read answers from what is folded now."""
    from engram.client import Client

    mem, server = served
    writer, reader = Client(server.url), Client(server.url)
    text, question, word = fact(250)
    written = writer.append_messages(AGENT, "lockers-other", [t.Message(role="user", content=text)])
    assert writer.position == written.position and reader.position == ""
    reader.recall(AGENT, question, record=False)  # answers without `after` (whatever it finds)
    assert any(word in h.content for h in writer.recall(AGENT, question, record=False).hits)

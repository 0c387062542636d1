"""Listing over REST, `engram.Client` and MCP (`resources/list`), with API keys: a key scoped to alice lists alice's
agent, discussions, messages and memories, and never bob's data or name. Served from the test process over the
in-process runtime."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.server.test_keys import ALICE, ALICE_TALK, BOB, BOB_SECRET, BOB_TALK, call, cli

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    from engram.api import types as t
    from tests.server.helpers import served_home

    home = tmp_path_factory.mktemp("listing") / "home"
    home.mkdir()
    with served_home(home, groups=["summarizer", "auto-ingest", "traces"]) as mem:
        mem.append_messages(ALICE, ALICE_TALK, t.AppendRequest(messages=[
            t.Message(role="user", content=f"Alice note {i}: she likes tea number {i}.") for i in range(5)]))
        mem.append_messages(BOB, BOB_TALK, t.AppendRequest(messages=[t.Message(role="user", content=BOB_SECRET)]))
        key_a = cli(home, "keys", "add", "--agents", ALICE).splitlines()[0]
        yield mem, home, key_a


def test_a_key_scoped_to_alice_lists_only_alices_agent_and_never_bobs_name(keyed):
    mem, home, key_a = keyed
    status, doc = call(home, "GET", "/v1/agents", key_a)
    assert status == 200 and [a["agent"] for a in doc["agents"]] == [ALICE]
    assert BOB not in json.dumps(doc)
    token = json.loads((home / "instance.json").read_text())["token"]
    assert {a["agent"] for a in call(home, "GET", "/v1/agents", token)[1]["agents"]} == {ALICE, BOB}


def test_a_key_scoped_to_alice_never_sees_bobs_discussions_messages_or_memories(keyed):
    mem, home, key_a = keyed
    for path in (f"/v1/agents/{BOB}/discussions", f"/v1/agents/{BOB}/discussions/{BOB_TALK}/messages",
                 f"/v1/agents/{BOB}/memories?kind=traces", f"/v1/agents/{ALICE}/discussions/{BOB_TALK}/messages",
                 f"/v1/agents/{ALICE}/memories?discussion={BOB_TALK}"):
        status, doc = call(home, "GET", path, key_a)
        # the same answer as for an agent or a discussion that does not exist: bob's data and bob are not shown
        made_up = path.replace(f"/{BOB}/", "/nobody/").replace(BOB_TALK, "no-such-talk")
        _, unknown = call(home, "GET", made_up, key_a)
        assert status == 404 and doc["error"]["code"] in ("unknown_agent", "unknown_discussion"), (path, doc)
        assert doc["error"]["message"].replace(BOB_TALK, "no-such-talk").replace(f"'{BOB}'", "'nobody'") \
            == unknown["error"]["message"], (path, doc, unknown)
        assert BOB_SECRET not in json.dumps(doc) and "'bob'" not in doc["error"]["message"].replace(
            f"agent '{BOB}' is not known", ""), (path, doc)


def test_a_discussions_messages_are_read_back_over_rest_a_page_at_a_time(keyed):
    mem, home, key_a = keyed
    path = f"/v1/agents/{ALICE}/discussions/{ALICE_TALK}/messages?limit=2"
    seen, cursor = [], None
    while True:
        status, page = call(home, "GET", path + (f"&cursor={cursor}" if cursor else ""), key_a)
        assert status == 200, page
        seen += [m["content"] for m in page["messages"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"Alice note {i}: she likes tea number {i}." for i in range(5)]
    status, page = call(home, "GET", f"/v1/agents/{ALICE}/discussions/{ALICE_TALK}/messages?order=newest&limit=1",
                        key_a)
    assert [m["content"] for m in page["messages"]] == ["Alice note 4: she likes tea number 4."]


def test_the_client_reads_its_own_writes_in_the_listing_at_once(keyed):
    from engram.api import types as t
    from engram.client import Client

    mem, home, key_a = keyed
    url = json.loads((home / "instance.json").read_text())["url"]
    with Client(url, api_key=key_a) as client:
        written = client.append_messages(ALICE, "fresh-talk", [t.Message(role="user", content="A brand new talk.")])
        assert client.position == written.position
        assert "fresh-talk" in [d.discussion for d in client.list_discussions(ALICE).discussions]
        assert [m.content for m in client.list_messages(ALICE, "fresh-talk").messages] == ["A brand new talk."]
        assert client.list_memories(ALICE, "traces").memories


def test_mcp_resources_list_alices_discussions_summaries_and_memories_and_nothing_of_bob(keyed):
    from mcp import Client
    from tests.server.test_mcp import http_transport

    mem, home, key_a = keyed
    url = json.loads((home / "instance.json").read_text())["url"] + "/mcp"

    async def session():
        async with Client(http_transport(url, key_a)) as client:
            listed = (await client.list_resources()).resources
            talks = await client.read_resource(f"engram://agents/{ALICE}/discussions")
            return listed, talks

    listed, talks = asyncio.run(session())
    uris = {str(r.uri) for r in listed}
    assert {f"engram://agents/{ALICE}/discussions", f"engram://agents/{ALICE}/memories",
            f"engram://agents/{ALICE}/discussions/{ALICE_TALK}/summary",
            f"engram://agents/{ALICE}/discussions/{ALICE_TALK}/memories"} <= uris
    assert not any(BOB in u or BOB_TALK in u for u in uris)
    assert ALICE_TALK in [d["discussion"] for d in json.loads(talks.contents[0].text)["discussions"]]

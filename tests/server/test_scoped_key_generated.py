"""Generated requests with a key scoped to `alice`, while `bob-zq7` holds a conversation with a distinctive secret:
no answer, on any operation of the server's own /openapi.json, any inspector view or any MCP tool, shows bob's
secret, nor bob's name unless the request itself named it (an echo of the caller's own words). Every path, query
and body field that names an agent or a discussion is aimed at alice's or at bob's, so the checks are reached.

Bounded: a few examples per operation (hypothesis, derandomized). Row "a key scoped to one agent" of
docs/security.md.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings, strategies as st
from tests.server.test_front_door import ALICE, ALICE_TALK, BOB, BOB_TALK, SECRET_WORD, cli, seed

pytestmark = pytest.mark.server

EXAMPLES = 4  # per operation
AGENTS = st.sampled_from([ALICE, BOB])
DISCUSSIONS = st.sampled_from([ALICE_TALK, BOB_TALK])
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    home = tmp_path_factory.mktemp("generated-scope") / "home"
    home.mkdir()
    mem = Engram(InProcessRuntime(load_service_config(home), groups=["traces"]).start())
    seed(mem)
    key = cli(home, "keys", "add", "--agents", ALICE).splitlines()[0]
    with Served(mem, max_body_bytes=1 << 20) as server:
        yield server, key
    mem.close()


def shows_bob(answer: str, asked: str) -> str | None:
    """What of bob an answer shows that the request did not already say, or None."""
    if SECRET_WORD in answer:
        return "bob's secret"
    if BOB in answer and BOB not in asked:
        return "bob's name"
    return None


def aim(case, agent: str, discussion: str) -> None:
    """Point every agent and discussion the generated case names at `agent` / `discussion`."""
    for params in (case.path_parameters, case.query):
        if params:
            if "agent" in params:
                params["agent"] = agent
            if "discussion" in params:
                params["discussion"] = discussion
    body = case.body
    if isinstance(body, dict):
        if "agent" in body:
            body["agent"] = agent
        if "discussion" in body:
            body["discussion"] = discussion
        for conversation in body.get("conversations") or []:
            if isinstance(conversation, dict):
                conversation["discussion"] = discussion
        if case.path == "/v1/chat/completions":
            body["model"] = f"engram/{agent}"
            body["messages"] = [{"role": "user", "content": f"[DiscussionId]{discussion}[/DiscussionId] the phrase?"}]


def settle(server) -> None:
    import time

    deadline = time.monotonic() + 300
    while server.api.jobs.running() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_no_generated_request_of_alices_key_shows_bobs_secret_or_name(served):
    server, key = served
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [op.ok() for op in schema.get_all_operations()]
    seen: list[tuple[str, str, int]] = []
    for op in operations:
        @given(case=op.as_strategy(), agent=AGENTS, discussion=DISCUSSIONS)
        @SETTINGS
        def check(case, agent, discussion):
            settle(server)
            aim(case, agent, discussion)
            if case.path == "/v1/events":  # Server-Sent Events: what the stream holds now, then its end
                case.query = {**(case.query or {}), "follow": "false"}
            response = case.call(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120)
            asked = json.dumps([case.formatted_path, case.query, case.body], default=str)
            seen.append((case.method, case.path, response.status_code))
            leak = shows_bob(response.text, asked)
            assert leak is None, (leak, case.method, case.formatted_path, case.body, response.text[:500])

        check()
    assert {(m, p) for m, p, _ in seen} == {(op.method.upper(), op.path) for op in operations}
    assert any(code < 300 for *_, code in seen) and any(code == 404 for *_, code in seen)
    settle(server)
    _, rows = server.api.rt.sql("SELECT content FROM messages WHERE agent = ?", [BOB])
    assert any(SECRET_WORD in r[0] for r in rows)  # and bob's conversation is still there: nothing of his was erased


def test_no_inspector_view_shows_bob_to_alices_key(served):
    import httpx

    from engram.inspect.api import VIEWS

    server, key = served
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as web:
        for view, spec in VIEWS.items():
            names = [p.name for p in spec]

            @given(agent=AGENTS, discussion=DISCUSSIONS, query=st.sampled_from(["vault phrase", "tea", "obelisk"]),
                   number=st.integers(0, 20))
            @SETTINGS
            def check(agent, discussion, query, number):
                values = {"agent": agent, "discussion": discussion, "query": query, "trace": query, "seq": number + 1}
                params = {n: str(values.get(n, number if n != "limit" else number + 1)) for n in names
                          if n in values or n in ("limit", "offset")}
                answer = web.get(f"/inspect/api/{view}", params=params)
                leak = shows_bob(answer.text, json.dumps(params))
                assert leak is None, (leak, view, params, answer.text[:500])

            check()
        page = web.get("/inspect")
        assert page.status_code == 200 and BOB not in page.text


def test_no_mcp_tool_or_resource_shows_bob_to_alices_key(served):
    import asyncio

    from mcp import Client

    from tests.server.test_mcp import http_transport

    server, key = served
    calls = [(tool, {"agent": agent, "discussion": discussion, **extra})
             for agent in (ALICE, BOB) for discussion in (ALICE_TALK, BOB_TALK)
             for tool, extra in (("recall", {"query": "vault phrase"}), ("search", {"keywords": "vault"}),
                                 ("remember", {"content": "hello"}),
                                 ("edit_message", {"message_id": "m-1", "content": "hello"}),
                                 ("remove_message", {"message_id": "m-1"}))]
    calls += [("working_memory", {"agent": a}) for a in (ALICE, BOB)]
    resources = [f"engram://agents/{a}/discussions/{d}/{kind}" for a in (ALICE, BOB) for d in (ALICE_TALK, BOB_TALK)
                 for kind in ("summary", "memories")]

    async def session():
        out = []
        async with Client(http_transport(server.url + "/mcp", key)) as client:
            for tool, args in calls:
                result = await client.call_tool(tool, args)
                out.append((json.dumps(args), " ".join(getattr(c, "text", "") for c in result.content)))
            for uri in resources:
                try:
                    result = await client.read_resource(uri)
                    text = " ".join(getattr(c, "text", "") for c in result.contents)
                except Exception as exc:  # a refused resource is an MCP error; its text must name nobody either
                    text = str(exc)
                out.append((uri, text))
        return out

    for asked, text in asyncio.run(session()):
        leak = shows_bob(text, asked)
        assert leak is None, (leak, asked, text[:500])

"""Every MCP tool is one a model can use well, whoever added it: it says when to use it, describes and bounds every
parameter, declares its result (outputSchema, answered as structured content) and its effects (annotations), and a
refusal carries REST's code over stdio and `/mcp` alike. Generic over `tools/list`: a new tool meets the same bar.

The MCP Inspector's CLI (`npx @modelcontextprotocol/inspector --cli`, installed by `make` from npm into
tests/server/inspector/node_modules) lists the tools and calls each, as a developer trying engram would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engram.api.errors import CODES

pytestmark = pytest.mark.server

AGENT = "probe"  # the agent the generic calls use (the destructive ones run last)
DISCUSSION = "probe-talk"
FACT = "Probe's cousin Tomas keeps bees in Braga."
INSPECTOR = Path(__file__).with_name("inspector")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from tests.server.helpers import served_home

    home = tmp_path_factory.mktemp("mcp-tools") / "home"
    home.mkdir()
    with served_home(home, groups=["traces", "working-memory"]) as mem:
        url = json.loads((home / "instance.json").read_text())["url"]
        yield mem, home, url


def http_client(url: str):
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url + "/mcp", http_client=httpx2.AsyncClient(timeout=120)))


def stdio_client(home: Path):
    from mcp import Client, StdioServerParameters

    engram = Path(sys.executable).with_name("engram")
    return Client(StdioServerParameters(command=str(engram), args=["--home", str(home), "mcp"]))


def listed(url: str) -> list[dict]:
    async def go():
        async with http_client(url) as client:
            return [t.model_dump(by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools]

    return asyncio.run(go())


def properties(schema: dict) -> dict[str, dict]:
    return schema.get("properties", {})


def branches(prop: dict) -> list[dict]:
    """A property's schema and, for an optional one, each of its `anyOf` branches but null."""
    return [b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"]


def test_every_mcp_tool_says_when_to_use_it_and_describes_and_bounds_each_parameter(served):
    _, _, url = served
    tools = listed(url)
    assert {"remember", "recall", "search", "working_memory", "write_working_memory", "forget"} <= {t["name"] for t in tools}
    for tool in tools:
        name = tool["name"]
        assert len(tool.get("description", "")) >= 80, f"{name}: a description saying what it does and when to use it"
        assert "use" in tool["description"].lower(), f"{name}: the description says when to use it"
        for pname, prop in properties(tool["inputSchema"]).items():
            assert prop.get("description"), f"{name}.{pname} has no description"
            for branch in branches(prop):
                if branch.get("type") == "string" and "enum" not in branch:
                    assert "maxLength" in branch, f"{name}.{pname}: a string without a bound"
                if branch.get("type") == "integer":
                    assert "minimum" in branch and "maximum" in branch, f"{name}.{pname}: a number without bounds"


def test_every_mcp_tool_declares_its_result_and_its_effects(served):
    _, _, url = served
    for tool in listed(url):
        name = tool["name"]
        output = tool.get("outputSchema")
        assert output and output["type"] == "object" and output["properties"], f"{name} has no outputSchema"
        hints = tool.get("annotations", {})
        for hint in ("readOnlyHint", "destructiveHint", "idempotentHint"):
            assert isinstance(hints.get(hint), bool), f"{name} does not say {hint}"
        if hints["readOnlyHint"]:
            assert not hints["destructiveHint"], f"{name}: read-only and destructive"
    by_name = {t["name"]: t["annotations"] for t in listed(url)}
    assert by_name["forget"]["destructiveHint"] and not by_name["forget"]["readOnlyHint"]
    assert by_name["search"]["readOnlyHint"] and by_name["working_memory"]["readOnlyHint"]
    assert not by_name["remember"]["idempotentHint"]


def arguments(tool: dict) -> dict:
    """Arguments a caller would send: every required parameter, from its name and schema."""
    out = {}
    schema = tool["inputSchema"]
    for pname in schema.get("required", []):
        prop = branches(properties(schema)[pname])[0]
        if pname == "agent":
            out[pname] = AGENT
        elif pname == "discussion":
            out[pname] = DISCUSSION
        elif "enum" in prop:
            out[pname] = prop["enum"][0]
        elif prop.get("type") == "integer":
            out[pname] = prop.get("minimum", 1)
        elif prop.get("type") == "boolean":
            out[pname] = False
        elif prop.get("type") == "object":
            out[pname] = {}
        elif prop.get("type") == "array":
            out[pname] = []
        else:
            out[pname] = FACT if pname in ("content", "text", "markdown") else "Tomas"
    return out


def refusal(result) -> dict:
    """A refused call as MCP's spec has a tool error: `isError`, the code and message as text, no structured content
    (it would not match the outputSchema), REST's error body in `_meta`. Returns that body's error."""
    from engram.mcp.server import ERROR_META

    assert result.is_error and result.structured_content is None, result
    body = (result.meta or {})[ERROR_META]["error"]
    assert body["code"] in CODES and body["message"], body
    assert result.content[0].text == f"{body['code']}: {body['message']}"
    return body


def test_every_mcp_tool_answers_structured_content_that_matches_its_schema_or_a_rest_error(served):
    """Each tool called once with the arguments a caller would send (destructive ones last): the `mcp` client checks
    the structured content against the tool's outputSchema; a refusal is a tool error with REST's code."""
    _, _, url = served

    async def go():
        async with http_client(url) as client:
            tools = [t.model_dump(by_alias=True, exclude_none=True) for t in (await client.list_tools()).tools]
            await client.call_tool("remember", {"agent": AGENT, "discussion": DISCUSSION, "content": FACT})
            tools.sort(key=lambda t: (t["annotations"]["destructiveHint"], t["name"] != "remember"))
            return [(t["name"], await client.call_tool(t["name"], arguments(t))) for t in tools]

    answered = asyncio.run(go())
    for name, result in answered:
        if result.is_error:
            refusal(result)
        else:
            assert result.structured_content is not None, name
            assert json.loads(result.content[0].text) == result.structured_content, name
    ok = {name for name, result in answered if not result.is_error}
    assert {"remember", "recall", "search", "working_memory", "write_working_memory", "forget"} <= ok


def refusals(client_for) -> list:
    async def go():
        async with client_for() as client:
            return [await client.call_tool("recall", {"agent": "../evil", "query": "x"}),
                    await client.call_tool("remember", {"agent": "ok", "discussion": "a/../../b", "content": "x"}),
                    await client.call_tool("recall", {"agent": "ok", "query": "x", "limit": -5}),
                    await client.call_tool("search", {"agent": "ok", "discussion": "d", "keywords": "x",
                                                      "limit": 5000}),
                    await client.call_tool("recall", {"agent": "ok", "query": "x", "limit": "many"}),
                    await client.call_tool("recall", {"agent": "ok"})]

    return [refusal(r) | {"text": r.content[0].text} for r in asyncio.run(go())]


def test_a_refused_mcp_call_answers_rests_code_over_stdio_and_http_alike(served):
    _, home, url = served
    over_http, over_stdio = refusals(lambda: http_client(url)), refusals(lambda: stdio_client(home))
    assert [r["code"] for r in over_http] == [r["code"] for r in over_stdio] == [
        "invalid_id", "invalid_id", "invalid_request", "invalid_request", "invalid_request", "invalid_request"]
    evil = over_stdio[0]["text"]
    assert evil.startswith("invalid_id: ") and "'../evil'" in evil and "POST" not in evil and "/v1/" not in evil
    assert "limit" in over_http[2]["message"] and ">= 1" in over_http[2]["message"]
    assert "limit" in over_stdio[3]["message"] and "<= 1000" in over_stdio[3]["message"]
    assert "query" in over_http[5]["message"]
    # REST answers the same code for the same id.
    import httpx

    rest = httpx.post(f"{url}/v1/agents/evil!/recall", json={"query": "x"}).json()["error"]
    assert rest["code"] == over_http[0]["code"] == "invalid_id"


def test_editing_or_deleting_a_memory_that_does_not_exist_is_a_tool_error_naming_it_over_stdio_and_http(served):
    """The refusal a model reads when it names a memory that is not there: `not_found: …` naming the id, as a tool
    error any client accepts (the `mcp` client's own result check included), over both transports."""
    _, home, url = served

    def calls(client_for) -> list:
        async def go():
            async with client_for() as client:
                await client.call_tool("remember", {"agent": AGENT, "discussion": DISCUSSION, "content": FACT})
                return [await client.call_tool("edit_memory", {"agent": AGENT, "memory_id": "no-such-trace",
                                                               "content": "Tomas keeps wasps."}),
                        await client.call_tool("delete_memory", {"agent": AGENT, "memory_id": "no-such-trace"}),
                        await client.call_tool("edit_memory", {"agent": AGENT, "memory_id": "no-such-fact",
                                                               "kind": "fact", "metadata": {"topic": "bees"}})]

        return [refusal(r) for r in asyncio.run(go())]

    for answered in (calls(lambda: http_client(url)), calls(lambda: stdio_client(home))):
        assert [r["code"] for r in answered] == ["not_found"] * 3
        assert "'no-such-trace'" in answered[0]["message"] and "'no-such-trace'" in answered[1]["message"]
        assert "'no-such-fact'" in answered[2]["message"]


def test_the_what_do_you_remember_prompt_asks_the_model_to_recall_first(served):
    _, _, url = served

    async def go():
        async with http_client(url) as client:
            prompts = (await client.list_prompts()).prompts
            got = await client.get_prompt("what_do_you_remember", {"agent": AGENT, "topic": "Tomas"})
            return prompts, got

    prompts, got = asyncio.run(go())
    prompt = next(p for p in prompts if p.name == "what_do_you_remember")
    assert prompt.description and all(a.description for a in prompt.arguments)
    text = got.messages[0].content.text
    assert "`recall`" in text and repr(AGENT) in text and "Tomas" in text


TOOL_ERROR = 5  # the Inspector CLI's exit code for a tool that answered `isError: true` (its result still printed)


def inspector(home: Path, *args: str, refused: bool = False) -> dict:
    """`npx @modelcontextprotocol/inspector --cli engram --home HOME mcp …` as installed by make (offline). A call
    the tool refuses exits TOOL_ERROR with the result on stdout; a result the Inspector rejects (structured content
    that does not match the outputSchema) exits otherwise, so it fails here."""
    engram = Path(sys.executable).with_name("engram")
    env = {**os.environ, "npm_config_offline": "true", "MCP_CATALOG_PATH": str(home.with_name("mcp-catalog.json"))}
    done = subprocess.run(["npx", "--no-install", "@modelcontextprotocol/inspector", "--cli", *args, "--",
                           str(engram), "--home", str(home), "mcp"], cwd=INSPECTOR, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == (TOOL_ERROR if refused else 0), (args, done.stdout[-2000:], done.stderr[-2000:])
    return json.loads(done.stdout)


@pytest.mark.skipif(shutil.which("npx") is None or not (INSPECTOR / "node_modules").exists(),
                    reason="the MCP Inspector is installed by `make test` (npm ci in tests/server/inspector)")
def test_the_mcp_inspector_cli_lists_the_tools_with_descriptions_and_calls_each(served):
    mem, home, _ = served
    tools = inspector(home, "--method", "tools/list")["tools"]
    assert {t["name"] for t in tools} >= {"remember", "recall", "search", "working_memory", "write_working_memory",
                                          "forget"}
    assert all(t["description"] and t["outputSchema"] and t["annotations"] for t in tools)
    # Writes first (remember first of all), then what replaces, then what erases: delete_memory, and forget last.
    tools.sort(key=lambda t: (t["annotations"]["destructiveHint"], t["name"] != "remember",
                              {"delete_memory": 1, "remove_message": 1, "forget": 2}.get(t["name"], 0)))
    by_name = {t["name"]: t for t in tools}

    def call(tool: dict, given: dict, refused: bool = False) -> dict:
        args = [f"{k}={v}" for k, v in given.items()]
        return inspector(home, "--method", "tools/call", "--tool-name", tool["name"],
                         *[a for arg in args for a in ("--tool-arg", arg)], refused=refused)

    # Two more facts (the agent exists for what follows; its memories for the tools that name one).
    for fact in ("Probe's aunt Rita sails from Porto every June.", "Probe's friend Joao repairs clocks in Lisbon."):
        remember = arguments(by_name["remember"])
        call(by_name["remember"], {**remember, **{k: fact for k in ("content", "text") if k in remember}})
    # A model naming a memory that is not there: the Inspector accepts the refusal (a tool error without structured
    # content) and shows REST's code and the id as text.
    correction = {"content": "Probe's aunt Rita sails from Faro every July."}  # what edit_memory is given
    for name in ("edit_memory", "delete_memory"):
        given = {**arguments(by_name[name]), "memory_id": "no-such-memory",
                 **(correction if name == "edit_memory" else {})}
        answer = call(by_name[name], given, refused=True)
        assert answer["isError"] is True and "structuredContent" not in answer, answer
        text = answer["content"][0]["text"]
        assert text.startswith("not_found: ") and "'no-such-memory'" in text, text
        assert answer["_meta"]["engram/error"]["error"]["code"] == "not_found"

    ids: list[str] = []
    for _ in range(5):  # each Inspector call is a new `engram mcp` process: its session has not seen those writes
        found = call(by_name["recall"], {**arguments(by_name["recall"]), "query": "Rita sails; Joao repairs clocks",
                                         "limit": 10})["structuredContent"]["hits"]
        ids = [h["trace_id"] for h in found]
        if ids:
            break
        time.sleep(1)
    for tool in tools:
        given = arguments(tool)
        if "memory_id" in given:
            if not ids:
                continue  # no memory to name: the refusal above is what these tools answer
            given.update(memory_id=ids[0], **(correction if tool["name"] == "edit_memory" else {}))  # edited, deleted
        if "message_id" in given:  # the first message remembered: edited, then removed
            _, rows = mem.sql("SELECT message_id FROM messages WHERE agent = ? AND discussion_id = ? ORDER BY seq",
                              [AGENT, DISCUSSION])
            given.update(message_id=rows[0][0], **(correction if tool["name"] == "edit_message" else {}))
        answer = call(tool, given)
        assert answer["structuredContent"] and not answer.get("isError"), (tool["name"], answer)
    called = {"remember", "recall", "search", "working_memory", "write_working_memory", "forget"}
    assert called <= {t["name"] for t in tools}


def test_a_tool_parameter_whose_python_type_is_not_its_bounds_type_is_refused_at_registration():
    """A parameter's Python type (what the SDK parses by) and the bounds its schema publishes (what a model reads)
    are written apart (`Annotated[str, described(t.Id, ...)]`): a tool whose two disagree is refused when it is
    registered, before any model sees a schema the SDK would not parse by."""
    from typing import Annotated

    from engram.api import types as t
    from engram.mcp.server import Agent, Count, checked, described

    async def agrees(agent, limit=5): ...

    async def disagrees(agent): ...

    # This module's annotations are strings (`from __future__ import annotations`); the server's are the types.
    agrees.__annotations__ = {"agent": Agent, "limit": Count}
    disagrees.__annotations__ = {"agent": Annotated[int, described(t.Id, "An agent.")]}
    assert checked(agrees) is agrees
    with pytest.raises(TypeError, match="disagrees: parameter agent"):
        checked(disagrees)

"""API keys: two keys, two agents — no endpoint, MCP tool or SQL query lets one key touch the other's agent.

The routes are taken from the server's own `/openapi.json`, so a route added later is checked too (a path
without `{agent}` must be listed below with what it may show a key, or this test fails). Keys are made
with `engram keys add` as a user makes them. Served from the test process over the in-process runtime.
"""

from __future__ import annotations

import asyncio
import http.client
import io
import json
import os
from contextlib import redirect_stdout
from urllib.parse import urlsplit

import pytest

ALICE, BOB = "alice", "bob"
ALICE_TALK, BOB_TALK = "alice-talk", "bob-talk"
BOB_SECRET = "Bob's locker code is 4711."
# Every path of the OpenAPI document without {agent}: what a key limited to agents gets there.
HOME_WIDE = {
    ("GET", "/v1/health"): {200},  # that the server is up: nothing else
    ("GET", "/v1/instance"): {422},  # an HMAC of a challenge (none given here): proves the server, grants nothing
    ("GET", "/v1/server"): {403},  # which home, pid, runtime: an admin key's
    ("POST", "/v1/llm/check"): {403},  # the home's LLM endpoints (URLs, models): an admin key's
    ("GET", "/v1/status"): {403},
    ("POST", "/v1/replay"): {403},
    ("POST", "/v1/shutdown"): {403},
    ("POST", "/v1/sql"): {200},  # scoped to the key's agents (checked below)
    ("GET", "/v1/jobs"): {200},  # only the key's own jobs (checked below)
    ("GET", "/v1/jobs/{job_id}"): {404},  # bob's job
    ("GET", "/v1/discussions/{discussion}"): {404},  # bob's discussion
    ("POST", "/v1/chat/completions"): {404},  # model engram/bob
    ("GET", "/v1/models"): {200},  # only alice's model (checked below)
    ("GET", "/v1/agents"): {200},  # only alice (checked below, and in tests/server/test_listing_served.py)
    ("POST", "/v1/reshard"): {403},  # the whole home's layout: an admin key's
    ("POST", "/v1/reindex"): {403},  # re-embeds every agent's memory: an admin key's
    ("POST", "/v1/export"): {403},  # every agent's events: an admin key's
    ("POST", "/v1/regenerate"): {403},  # every discussion of the home through Message Batches: an admin key's
    ("GET", "/v1/events"): {200},  # only the key's agents' events (checked here: nothing of bob's; tests/server/test_events.py)
    ("POST", "/v1/completions"): {404},  # model engram/bob
    ("POST", "/api/chat"): {404},  # model engram/bob:latest (Ollama's "model not found")
    ("POST", "/api/generate"): {404},  # model engram/bob
    ("POST", "/api/show"): {404},  # model engram/bob
    ("GET", "/api/tags"): {200},  # only alice's model (checked below)
    ("GET", "/api/version"): {200},  # the Ollama API version: nothing of the home
    ("GET", "/api/ps"): {200},  # no models loaded: nothing of the home
}
# Streaming routes, asked for what they hold now and then the end (not followed for ever).
QUERIES = {"/v1/events": "?after=0&follow=false"}


def cli(home, *args) -> str:
    from engram.cli.main import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--home", str(home), *args]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    from engram.api import types as t
    from tests.server.helpers import served_home

    home = tmp_path_factory.mktemp("keys") / "home"
    home.mkdir()
    with served_home(home, groups=["summarizer", "traces"]) as mem:
        mem.append_messages(ALICE, ALICE_TALK, t.AppendRequest(messages=[t.Message(role="user", content="Alice likes tea.")]))
        mem.append_messages(BOB, BOB_TALK, t.AppendRequest(messages=[t.Message(role="user", content=BOB_SECRET)]))
        key_a = cli(home, "keys", "add", "--agents", ALICE).splitlines()[0]
        key_b = cli(home, "keys", "add", "--agents", BOB).splitlines()[0]
        token = json.loads((home / "instance.json").read_text())["token"]
        yield mem, home, key_a, key_b, token


def call(home, method: str, path: str, key: str | None, body=None, headers: dict | None = None):
    url = urlsplit(json.loads((home / "instance.json").read_text())["url"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    try:
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        if key:
            hdrs["Authorization"] = f"Bearer {key}"
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw or b"null")
        except ValueError:
            return resp.status, raw
    finally:
        conn.close()


def head(mem) -> int:
    return sum(mem.rt.heads().values())


def fill(path: str, job_id: str) -> str:
    return (path.replace("{agent}", BOB).replace("{discussion}", BOB_TALK).replace("{job_id}", job_id)
            .replace("{kind}", "trace").replace("{memory_id}", "t-1"))


BODIES = {"/v1/chat/completions": {"model": f"engram/{BOB}", "messages": [
    {"role": "user", "content": f"[DiscussionId]{BOB_TALK}[/DiscussionId] What is my locker code?"}]},
    "/v1/sql": {"query": "SELECT agent, content FROM messages"}, "/v1/replay": {},
    "/v1/completions": {"model": f"engram/{BOB}", "prompt": f"[DiscussionId]{BOB_TALK}[/DiscussionId] My locker code?"},
    "/api/chat": {"model": f"engram/{BOB}:latest", "stream": False, "messages": [
        {"role": "user", "content": f"[DiscussionId]{BOB_TALK}[/DiscussionId] What is my locker code?"}]},
    "/api/generate": {"model": f"engram/{BOB}", "stream": False,
                      "prompt": f"[DiscussionId]{BOB_TALK}[/DiscussionId] What is my locker code?"},
    "/api/show": {"model": f"engram/{BOB}"}}


def test_keys_are_listed_by_id_and_stored_hashed(keyed):
    mem, home, key_a, key_b, _ = keyed
    listing = cli(home, "keys", "list")
    stored = (home / "keys.json").read_text()
    assert key_a.split("-")[1] in listing and ALICE in listing and BOB in listing
    assert key_a not in stored and key_b not in stored and key_a.split("-")[2] not in stored
    assert oct((home / "keys.json").stat().st_mode & 0o777) == "0o600"


def test_no_key_and_a_wrong_key_are_refused_with_401(keyed):
    mem, home, key_a, _, _ = keyed
    assert call(home, "GET", "/v1/status", None)[0] == 401
    wrong = key_a[:-1] + ("B" if key_a.endswith("A") else "A")  # `key_a[:-2] + "AA"` was key_a 1 time in 1024
    status, doc = call(home, "POST", f"/v1/agents/{ALICE}/recall", wrong, {"query": "tea"})
    assert status == 401 and doc["error"]["code"] == "unauthorized"
    assert call(home, "GET", "/v1/health", None)[0] == 200


def test_a_key_touches_its_own_agent(keyed):
    mem, home, key_a, _, token = keyed
    status, doc = call(home, "POST", f"/v1/agents/{ALICE}/recall", key_a, {"query": "What does Alice like?"})
    assert status == 200 and doc["agent"] == ALICE
    assert call(home, "GET", "/v1/status", token)[0] == 200  # the instance token (the CLI's) is the home owner's


def test_every_route_refuses_another_keys_agent_and_appends_nothing(keyed):
    mem, home, key_a, _, token = keyed
    # A job of bob's, started by the home owner: alice's key must not see it.
    status, job = call(home, "POST", f"/v1/agents/{BOB}/discussions/{BOB_TALK}/replay", token, {"verify": True})
    assert status == 202
    _, spec = call(home, "GET", "/openapi.json", None)
    before = head(mem)
    checked = 0
    for path, item in spec["paths"].items():
        for method in item:
            method = method.upper()
            body = BODIES.get(path, {"query": "locker", "messages": [{"role": "user", "content": "x"}]}) \
                if method in ("POST", "PUT") else None
            status, doc = call(home, method, fill(path, job["id"]) + QUERIES.get(path, ""), key_a, body)
            if "{agent}" in path:
                assert (status, doc["error"]["code"]) == (404, "unknown_agent"), (method, path, status, doc)
            else:
                assert (method, path) in HOME_WIDE, f"{method} {path}: a new route: say what a key limited to agents gets"
                assert status in HOME_WIDE[(method, path)], (method, path, status, doc)
                shown = doc.decode() if isinstance(doc, bytes) else json.dumps(doc)
                assert BOB_SECRET not in shown and f'"agent": "{BOB}"' not in shown, (method, path, shown)
            checked += 1
    assert checked >= 30
    assert head(mem) == before  # nothing appended by a refused request
    # The header way to name an agent is refused the same way.
    status, doc = call(home, "POST", "/v1/chat/completions", key_a, BODIES["/v1/chat/completions"] | {"model": "x"},
                       {"X-Engram-Agent": BOB})
    assert status == 404 and doc["error"]["code"] == "unknown_agent"
    # What the home-wide reads show alice's key: only alice.
    _, models = call(home, "GET", "/v1/models", key_a)
    assert [m["id"] for m in models["data"]] == ["engram", f"engram/{ALICE}"]
    _, agents = call(home, "GET", "/v1/agents", key_a)
    assert [a["agent"] for a in agents["agents"]] == [ALICE]
    _, tags = call(home, "GET", "/api/tags", key_a)
    assert [m["model"] for m in tags["models"]] == ["engram:latest", f"engram/{ALICE}:latest"]
    _, jobs = call(home, "GET", "/v1/jobs", key_a)
    assert job["id"] not in [j["id"] for j in jobs["jobs"]]
    status, rows = call(home, "POST", "/v1/sql", key_a, BODIES["/v1/sql"])
    assert status == 200 and {r[0] for r in rows["rows"]} == {ALICE}  # the confined SQL, scoped to the key


def test_an_mcp_key_cannot_remember_or_recall_for_another_keys_agent(keyed):
    from mcp import Client
    from tests.server.test_mcp import http_transport

    mem, home, key_a, _, _ = keyed
    url = json.loads((home / "instance.json").read_text())["url"] + "/mcp"
    before = head(mem)

    async def session(key):
        async with Client(http_transport(url, key)) as client:
            recall = await client.call_tool("recall", {"agent": BOB, "query": "locker code"})
            remember = await client.call_tool("remember", {"agent": BOB, "discussion": BOB_TALK, "content": "hi"})
            search = await client.call_tool("search", {"agent": BOB, "discussion": BOB_TALK, "keywords": "locker"})
            forget = await client.call_tool("forget", {"agent": BOB, "discussion": BOB_TALK})
            own = await client.call_tool("recall", {"agent": ALICE, "query": "tea"})
            return [recall, remember, search, forget], own

    refused, own = asyncio.run(session(key_a))
    for result in refused:
        assert result.is_error and "unknown_agent" in result.content[0].text
        assert BOB_SECRET not in result.content[0].text
    assert not own.is_error
    assert head(mem) - before <= 1  # alice's own recall may record one TraceRetrieved; nothing of bob's
    _, rows = mem.sql("SELECT content FROM messages WHERE discussion_id = ?", [BOB_TALK])
    assert [r[0] for r in rows] == [BOB_SECRET]
    with pytest.raises(Exception):
        asyncio.run(session(None))  # no key: the /mcp endpoint answers 401


def test_an_openai_sdk_user_with_one_keys_key_gets_not_found_for_the_other_keys_agent(keyed):
    import openai

    mem, home, key_a, _, _ = keyed
    url = json.loads((home / "instance.json").read_text())["url"]
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key_a, max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as err:
            client.chat.completions.create(model=f"engram/{BOB}", messages=[{"role": "user", "content": "hi"}])
        assert (err.value.code, err.value.type) == ("unknown_agent", "not_found_error")
    with openai.OpenAI(base_url=f"{url}/v1", api_key="not-a-key", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError) as err:
            client.models.list()
        assert (err.value.code, err.value.type) == ("unauthorized", "authentication_error")


def test_a_key_scoped_to_alice_sending_tools_to_bobs_model_learns_nothing_of_bob_and_appends_nothing(keyed):
    """The doors' refusal of `tools` (OpenAI's `tools`/`tool_choice`/`functions`, Ollama's `tools`) comes after the key
    is checked and names only the field: no key is 401, and alice's key asking for bob's model gets the same 400 as for
    a model that does not exist, with neither bob's name nor his discussion in it."""
    import openai

    mem, home, key_a, _, _ = keyed
    url = json.loads((home / "instance.json").read_text())["url"]
    before = head(mem)
    tools = [{"type": "function", "function": {"name": "locker", "parameters": {"type": "object"}}}]
    ask = [{"role": "user", "content": f"[DiscussionId]{BOB_TALK}[/DiscussionId] What is my locker code?"}]
    seen = []
    with openai.OpenAI(base_url=f"{url}/v1", api_key=key_a, max_retries=0) as client:
        for model in (f"engram/{BOB}", "engram/nobody"):
            with pytest.raises(openai.BadRequestError) as err:
                client.chat.completions.create(model=model, messages=ask, tools=tools)
            assert (err.value.code, err.value.param) == ("unsupported_field", "tools")
            seen.append(err.value.body)
    assert seen[0] == seen[1] and BOB not in json.dumps(seen[0]) and BOB_TALK not in json.dumps(seen[0])
    status, body = call(home, "POST", "/api/chat", key_a, {"model": f"engram/{BOB}:latest", "stream": False,
                                                           "messages": ask, "tools": tools})
    assert status == 400 and body["error"].startswith('"tools"') and BOB not in body["error"], body
    assert call(home, "POST", "/v1/chat/completions", None, {"model": f"engram/{BOB}", "messages": ask,
                                                             "tools": tools})[0] == 401
    assert call(home, "POST", "/api/chat", None, {"model": f"engram/{BOB}", "messages": ask, "tools": tools})[0] == 401
    assert head(mem) == before


def test_revoking_a_key_locks_it_out(keyed):
    mem, home, _, key_b, _ = keyed
    assert call(home, "POST", f"/v1/agents/{BOB}/recall", key_b, {"query": "locker"})[0] == 200
    key_id = key_b.split("-")[1]
    assert "revoked" in cli(home, "keys", "revoke", key_id)
    assert call(home, "POST", f"/v1/agents/{BOB}/recall", key_b, {"query": "locker"})[0] == 401


def test_without_keys_the_server_refuses_a_non_loopback_host_and_says_why(tmp_path, capsys):
    from engram.boot.serve import check_exposure, main

    home = tmp_path / "home"
    home.mkdir()
    before = os.getcwd()
    assert main(["serve", "--home", str(home), "--host", "0.0.0.0", "--runtime", "inprocess"]) == 2
    assert os.getcwd() == before  # a refusal leaves the caller where it was
    err = capsys.readouterr().err.strip()
    assert err.startswith("engram: error: no API key is configured") and "0.0.0.0" in err and len(err.splitlines()) == 1
    assert "loopback only" in check_exposure(home, "127.0.0.1")
    cli(home, "keys", "add", "--agents", ALICE)
    assert "every request needs one" in check_exposure(home, "0.0.0.0")


# ---------------------------------------------------------------------------------------------- the inspector in a browser

def browser(home, **kw):
    """An HTTP client that keeps cookies as a browser does (its requests carry the server's own Origin on POST)."""
    import httpx

    url = json.loads((home / "instance.json").read_text())["url"]
    return httpx.Client(base_url=url, follow_redirects=False, timeout=120, **kw), url


def test_a_browser_logs_in_to_the_inspector_with_a_key_and_sees_only_that_keys_agents(keyed):
    mem, home, key_a, _, _ = keyed
    web, url = browser(home)
    with web:
        page = web.get(f"/inspect?agent={ALICE}")
        assert page.status_code == 303 and page.headers["location"] == f"/inspect/login?next=%2Finspect%3Fagent%3D{ALICE}"
        form = web.get(page.headers["location"])
        assert form.status_code == 200 and 'name="key"' in form.text and 'type="password"' in form.text
        wrong = web.post("/inspect/login", data={"key": "ek-00000000-" + "A" * 52, "next": f"/inspect?agent={ALICE}"},
                         headers={"Origin": url})
        assert wrong.status_code == 401 and "not a valid API key" in wrong.text and "set-cookie" not in wrong.headers
        done = web.post("/inspect/login", data={"key": key_a, "next": f"/inspect?agent={ALICE}"},
                        headers={"Origin": url})
        assert done.status_code == 303 and done.headers["location"] == f"/inspect?agent={ALICE}"
        cookie = done.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/inspect" in cookie and "Max-Age=" in cookie
        assert key_a not in cookie and key_a.split("-")[2] not in cookie  # only the key's id, never the key
        # The session is the key's: its agent, nothing of the other's.
        assert web.get("/inspect").status_code == 200 and f"agent={ALICE}" in web.get("/inspect").text
        assert f"agent={BOB}" not in web.get("/inspect").text
        shown = web.get(f"/inspect?agent={ALICE}")
        assert shown.status_code == 200 and "/inspect/logout" in shown.text
        assert web.get(f"/inspect/api/timeline?agent={ALICE}").status_code == 200
        other = web.get(f"/inspect/api/timeline?agent={BOB}")
        assert other.status_code == 404 and other.json()["error"]["code"] == "unknown_agent"
        # The cookie opens the inspector only: the REST API still wants a key.
        web.cookies.set("engram_session", web.cookies.get("engram_session"), path="/")
        assert web.post(f"/v1/agents/{ALICE}/recall", json={"query": "tea"}).status_code == 401


def test_the_inspector_refuses_a_forged_a_cross_site_and_a_logged_out_session(keyed):
    import httpx

    mem, home, key_a, _, _ = keyed
    web, url = browser(home)
    with web:
        cross = web.post("/inspect/login", data={"key": key_a}, headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403 and "set-cookie" not in cross.headers
        assert web.post("/inspect/login", data={"key": key_a}).status_code == 403  # neither Origin nor Referer
        assert web.post("/inspect/login", data={"key": key_a}, headers={"Origin": url}).status_code == 303
        value = web.cookies.get("engram_session")
        assert web.get(f"/inspect/api/timeline?agent={ALICE}").status_code == 200
        forged = value.rsplit(".", 2)[0] + ".9999999999." + value.rsplit(".", 1)[1]  # a later expiry, same signature
        with httpx.Client(base_url=url, cookies={"engram_session": forged}) as other:
            assert other.get(f"/inspect/api/timeline?agent={ALICE}").status_code == 401
        assert web.post("/inspect/logout", headers={"Origin": "http://evil.example"}).status_code == 403
        assert web.get(f"/inspect/api/timeline?agent={ALICE}").status_code == 200  # still logged in
        out = web.post("/inspect/logout", headers={"Origin": url})
        assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
        assert web.get(f"/inspect?agent={ALICE}").status_code == 303  # back to the login form
    # A copy of the cookie kept from before the logout opens nothing either.
    with httpx.Client(base_url=url, cookies={"engram_session": value}) as copy:
        assert copy.get(f"/inspect/api/timeline?agent={ALICE}").status_code == 401


def test_revoking_a_key_ends_its_browser_sessions(keyed):
    mem, home, _, _, _ = keyed
    key = cli(home, "keys", "add", "--agents", ALICE).splitlines()[0]
    web, url = browser(home)
    with web:
        assert web.post("/inspect/login", data={"key": key}, headers={"Origin": url}).status_code == 303
        assert web.get(f"/inspect/api/timeline?agent={ALICE}").status_code == 200
        cli(home, "keys", "revoke", key.split("-")[1])
        assert web.get(f"/inspect/api/timeline?agent={ALICE}").status_code == 401

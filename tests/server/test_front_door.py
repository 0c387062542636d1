"""The front door (issue 21, part A): what an unauthenticated caller, a web page in the user's browser, a key scoped
to one agent and a remote client each get. Every test here is a row of docs/security.md.

`bob-zq7` holds a conversation with a distinctive secret; `alice`'s key must never see it, nor bob's name.
Served from the test process over the in-process runtime (the same app `engram serve` runs).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.server

ALICE, BOB, DAVE = "alice", "bob-zq7", "dave"
ALICE_TALK, BOB_TALK = "alice-talk", "bob-vault-talk"
BOB_SECRET = "Bob's vault phrase is tangerine-obelisk-42."
SECRET_WORD = "tangerine-obelisk"
# A discussion id both agents use, each for a discussion of its own (discussion ids are unique within an agent only).
SHARED_TALK = "my-trip"
BOB_TRIP = "Bob hides the spare key under the tangerine-obelisk planter."
ALICE_TRIP = "Alice packs a red umbrella for the trip to Porto."


def cli(home, *args) -> str:
    import io
    from contextlib import redirect_stdout

    from engram.cli.main import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--home", str(home), *args]) == 0
    return out.getvalue()


def leaks(text: str) -> bool:
    """Whether a response shows anything of bob: his secret or his name."""
    return SECRET_WORD in text or BOB in text


def seed(mem) -> None:
    from engram.api import types as t

    mem.append_messages(ALICE, ALICE_TALK, t.AppendRequest(messages=[
        t.Message(role="user", content="Alice likes green tea in the morning."),
        t.Message(role="assistant", content="Noted: green tea.")]))
    mem.append_messages(BOB, BOB_TALK, t.AppendRequest(messages=[
        t.Message(role="user", content=BOB_SECRET), t.Message(role="assistant", content="I will keep it safe.")]))


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """A home with keys: `alice` (alice's), `alice_dave` (alice's and dave's, dave has no events), the token."""
    from tests.server.helpers import served_home

    home = tmp_path_factory.mktemp("frontdoor") / "home"
    home.mkdir()
    with served_home(home, groups=["traces"]) as mem:
        seed(mem)
        keys = {"alice": cli(home, "keys", "add", "--agents", ALICE).splitlines()[0],
                "alice_dave": cli(home, "keys", "add", "--agents", f"{ALICE},{DAVE}").splitlines()[0]}
        info = json.loads((home / "instance.json").read_text())
        yield {"mem": mem, "home": home, "url": info["url"], "token": info["token"], **keys}


@pytest.fixture(scope="module")
def open_home(tmp_path_factory):
    """A home without keys (loopback only), as a user has it before `engram keys add`."""
    from tests.server.helpers import served_home

    home = tmp_path_factory.mktemp("frontdoor-open") / "home"
    home.mkdir()
    with served_home(home, groups=["traces"]) as mem:
        seed(mem)
        info = json.loads((home / "instance.json").read_text())
        yield {"mem": mem, "home": home, "url": info["url"], "token": info["token"]}


def http(env, key: str | None = None, **headers) -> httpx.Client:
    hdrs = dict(headers)
    if key:
        hdrs["Authorization"] = f"Bearer {key}"
    return httpx.Client(base_url=env["url"], headers=hdrs, timeout=120)


def head(mem) -> int:
    return sum(mem.rt.heads().values())


def error_shape(response: httpx.Response, *names: str) -> tuple[int, str, str]:
    """(status, code, message with `names` replaced by <x>): what two refusals must share to be indistinguishable."""
    doc = response.json()["error"]
    message = doc["message"]
    for n in names:
        message = message.replace(n, "<x>")
    return response.status_code, doc["code"], message


# ---------------------------------------------------------------------------------------------- finding 1: health

def test_health_says_only_that_the_server_is_up_and_no_open_route_hands_out_the_instance_token(keyed):
    with http(keyed) as web:
        health = web.get("/v1/health")
        assert health.status_code == 200 and health.json() == {"service": "engram", "status": "up"}
        spec = web.get("/openapi.json").json()
        for path, item in spec["paths"].items():
            if "get" in item and "{" not in path:
                answer = web.get(path)
                assert keyed["token"] not in answer.text, path
                assert keyed["home"].name not in answer.text or answer.status_code == 401, path
        # The token stays an admin key of the home's owner (read from the 0600 instance.json), so the CLI works.
        owner = web.get("/v1/status", headers={"Authorization": f"Bearer {keyed['token']}"})
        assert owner.status_code == 200
    assert stat.S_IMODE((keyed["home"] / "instance.json").stat().st_mode) == 0o600


def test_the_cli_trusts_its_server_only_through_the_homes_files(keyed):
    from engram.server.instance import instance_path, live_server, read_instance, write_instance

    home = keyed["home"]
    info = read_instance(home)
    assert live_server(home) == info  # the server proves it holds the token of instance.json, without sending it
    forged = {**info, "token": "0" * 32}  # a server at that URL that does not hold the home's token is not ours
    write_instance(home, forged)
    try:
        assert live_server(home) is None
    finally:
        write_instance(home, info)
    assert json.loads(instance_path(home).read_text())["token"] == keyed["token"]


# ---------------------------------------------------------------------------------------------- findings 2, 8, 9

def test_the_inspector_answers_bobs_discussion_to_alices_key_as_one_that_does_not_exist(keyed):
    with http(keyed, keyed["alice"]) as web:
        bobs = web.get("/inspect/api/working", params={"agent": ALICE, "discussion": BOB_TALK})
        none = web.get("/inspect/api/working", params={"agent": ALICE, "discussion": "no-such-talk"})
        assert bobs.status_code == 404 and not leaks(bobs.text), bobs.text[:500]
        assert error_shape(bobs, BOB_TALK) == error_shape(none, "no-such-talk")
        for view in ("discussion", "messages", "timeline", "overview"):
            answer = web.get(f"/inspect/api/{view}", params={"agent": ALICE, "discussion": BOB_TALK})
            assert answer.status_code == 404 and not leaks(answer.text), (view, answer.text[:300])
        own = web.get("/inspect/api/working", params={"agent": ALICE, "discussion": ALICE_TALK})
        assert own.status_code == 200 and "green tea" in own.text


def test_the_context_of_a_discussion_is_read_for_its_own_agent_only(keyed):
    from engram.memory.context.history import build_context
    from engram.config.home import ProjectionPaths

    mem = keyed["mem"]
    ctx = build_context(mem.sql_rows, mem.home, ProjectionPaths(mem.home.projections_dir), ALICE, BOB_TALK)
    assert not leaks(json.dumps(ctx.as_json())) and ctx.turns == []


def test_a_discussion_of_another_agent_answers_as_unknown_and_no_error_names_its_agent(keyed):
    mem = keyed["mem"]
    before = head(mem)
    with http(keyed, keyed["alice"]) as web:
        for path in ("memories", "summary", "compactions", "context"):
            bobs = web.get(f"/v1/agents/{ALICE}/discussions/{BOB_TALK}/{path}")
            none = web.get(f"/v1/agents/{ALICE}/discussions/no-such-talk/{path}")
            assert bobs.status_code == 404 and not leaks(bobs.text), (path, bobs.text)
            assert error_shape(bobs, BOB_TALK) == error_shape(none, "no-such-talk"), path
        bobs = web.get(f"/v1/discussions/{BOB_TALK}")
        none = web.get("/v1/discussions/no-such-talk")
        assert error_shape(bobs, BOB_TALK) == error_shape(none, "no-such-talk") and not leaks(bobs.text)
    assert head(mem) == before


def _bob_has_his_trip(mem) -> None:
    from engram.api import types as t

    mem.append_messages(BOB, SHARED_TALK, t.AppendRequest(messages=[t.Message(role="user", content=BOB_TRIP)]))


def _contents(mem, agent: str, discussion: str) -> list[str]:
    _, rows = mem.sql("SELECT content FROM messages WHERE agent = ? AND discussion_id = ? ORDER BY seq",
                      [agent, discussion])
    return [r[0] for r in rows]


def test_two_agents_each_have_their_own_discussion_of_the_same_id_through_rest_and_the_proxy(keyed):
    """Bob's `my-trip` does not block alice's (no 409 any more), and each sees only its own messages and memories;
    nothing alice's key gets back shows bob's words or name."""
    mem = keyed["mem"]
    _bob_has_his_trip(mem)
    nodes = [{"id": "recent", "type": "RecentMemorySummarizerTool"}, {"type": "GetCurrentSummaryFromFile"}]
    with http(keyed, keyed["alice"]) as web:
        writes = [
            web.post(f"/v1/agents/{ALICE}/discussions/{SHARED_TALK}/messages",
                     json={"messages": [{"role": "user", "content": ALICE_TRIP}]}),
            web.post(f"/v1/agents/{ALICE}/messages", json={"conversations": [
                {"discussion": SHARED_TALK, "messages": [{"role": "user", "content": "Alice books the 9 am train."}]}]}),
            web.post(f"/v1/agents/{ALICE}/discussions/{SHARED_TALK}/tool-failures", json={"tool": "x", "error": "y"}),
            web.post("/v1/chat/completions", json={"model": f"engram/{ALICE}", "messages": [
                {"role": "user", "content": f"[DiscussionId]{SHARED_TALK}[/DiscussionId] where is the spare key?"}]}),
            web.post(f"/v1/agents/{ALICE}/workflows/run", json={"nodes": nodes, "discussion": SHARED_TALK}),
        ]
        for answer in writes:
            assert answer.status_code == 200 and not leaks(answer.text), (answer.request.url, answer.text[:500])
        assert writes[3].headers["X-Engram-Discussion"] == SHARED_TALK
        page = web.get(f"/v1/agents/{ALICE}/discussions/{SHARED_TALK}/messages", params={"limit": 50})
        assert page.status_code == 200 and not leaks(page.text)
        assert ALICE_TRIP in page.text and "9 am train" in page.text
        for path in ("memories", "summary", "context"):
            answer = web.get(f"/v1/agents/{ALICE}/discussions/{SHARED_TALK}/{path}")
            assert answer.status_code == 200 and not leaks(answer.text), (path, answer.text[:300])
        # The route given only an id resolves it among the key's own agents: alice's, and nothing says bob has one.
        own = web.get(f"/v1/discussions/{SHARED_TALK}")
        assert own.status_code == 200 and own.json() == {"discussion": SHARED_TALK, "agent": ALICE}
    alices, bobs = _contents(mem, ALICE, SHARED_TALK), _contents(mem, BOB, SHARED_TALK)
    assert bobs == [BOB_TRIP]
    assert ALICE_TRIP in alices and not any(SECRET_WORD in c for c in alices)
    with http(keyed, keyed["token"]) as web:  # the home's owner sees both: the id alone does not say whose
        both = web.get(f"/v1/discussions/{SHARED_TALK}")
        assert both.status_code == 409 and both.json()["error"]["code"] == "ambiguous_discussion"
        assert ALICE not in both.text and BOB not in both.text
        bob_page = web.get(f"/v1/agents/{BOB}/discussions/{SHARED_TALK}/messages", params={"limit": 50})
        assert BOB_TRIP in bob_page.text and ALICE_TRIP not in bob_page.text


def test_an_agent_a_key_may_touch_but_without_events_is_not_told_the_other_agents(keyed):
    with http(keyed, keyed["alice_dave"]) as web:
        dave = web.get(f"/v1/agents/{DAVE}/traces")
        carol = web.get("/v1/agents/carol/traces")  # not this key's
        assert dave.status_code == 404 and not leaks(dave.text) and ALICE not in dave.json()["error"]["message"]
        assert error_shape(dave, DAVE) == error_shape(carol, "carol")
    with http(keyed, keyed["token"]) as web:  # the home's owner sees every agent: a typo is told what exists
        typo = web.get("/v1/agents/alcie/traces").json()["error"]["message"]
        assert typo.endswith(f"the agents are: {ALICE}, {BOB}"), typo


def test_an_mcp_resource_and_search_of_another_agents_discussion_name_nobody(keyed):
    import asyncio

    from mcp import Client

    from tests.server.test_mcp import http_transport

    async def session():
        async with Client(http_transport(keyed["url"] + "/mcp", keyed["alice"])) as client:
            search = await client.call_tool("search", {"agent": ALICE, "discussion": BOB_TALK, "keywords": "vault"})
            summary = await client.call_tool("summary", {"agent": ALICE, "discussion": BOB_TALK})
            return [search, summary]

    for result in asyncio.run(session()):
        text = result.content[0].text
        assert result.is_error and not leaks(text), text


def test_a_key_scoped_to_alice_cannot_edit_or_remove_bobs_message_over_mcp_and_is_answered_as_for_a_missing_one(keyed):
    import asyncio

    from mcp import Client

    from tests.server.test_mcp import http_transport

    mem = keyed["mem"]
    _, rows = mem.sql("SELECT agent, message_id FROM messages WHERE discussion_id IN (?, ?) AND role = 'user'",
                      [ALICE_TALK, BOB_TALK])
    ids = dict(rows)
    # bob's message by bob's agent, by alice's agent, and the same asks of an agent and a discussion nobody has.
    aims = [(BOB, BOB_TALK), ("bob-zz9", "bob-vault-tolk"), (ALICE, BOB_TALK), (ALICE, "bob-vault-tolk")]

    async def session():
        async with Client(http_transport(keyed["url"] + "/mcp", keyed["alice"])) as client:
            out = []
            for agent, discussion in aims:
                where = {"agent": agent, "discussion": discussion, "message_id": ids[BOB]}
                out.append((await client.call_tool("edit_message", {**where, "content": "The phrase is 0000."}),
                            await client.call_tool("remove_message", where)))
            own = await client.call_tool("edit_message", {"agent": ALICE, "discussion": ALICE_TALK,
                                                          "message_id": ids[ALICE],
                                                          "content": "Alice likes mint tea in the morning."})
            return out, own

    answers, own = asyncio.run(session())
    texts = []
    for edit, remove in answers:
        for result in (edit, remove):
            # refused, naming only what was asked for (bob's name when asked by it, as for any agent nobody has)
            assert result.is_error and SECRET_WORD not in result.content[0].text, result.content[0].text
        texts.append(tuple(r.content[0].text.replace("bob-zz9", "<x>").replace(BOB, "<x>")
                           .replace("bob-vault-tolk", "<d>").replace(BOB_TALK, "<d>") for r in (edit, remove)))
    assert texts[0] == texts[1] and texts[2] == texts[3]  # exactly what an agent or discussion nobody has gets
    _, changes = mem.sql("SELECT agent, type, count(*) FROM events WHERE type IN ('MessageEdited', 'MessageRemoved') "
                         "GROUP BY ALL")
    assert changes == [(ALICE, "MessageEdited", 1)]  # nothing but alice's own edit was recorded
    assert not own.is_error and own.structured_content["change"] == "edited"
    assert _contents(mem, BOB, BOB_TALK)[0] == BOB_SECRET
    assert "Alice likes mint tea in the morning." in _contents(mem, ALICE, ALICE_TALK)


def test_over_mcp_each_agent_remembers_and_searches_its_own_discussion_of_a_shared_id(keyed):
    import asyncio

    from mcp import Client

    from tests.server.test_mcp import http_transport

    mem = keyed["mem"]
    if BOB_TRIP not in _contents(mem, BOB, SHARED_TALK):
        _bob_has_his_trip(mem)

    async def session():
        async with Client(http_transport(keyed["url"] + "/mcp", keyed["alice"])) as client:
            remember = await client.call_tool("remember", {"agent": ALICE, "discussion": SHARED_TALK,
                                                           "content": "Alice's hotel in Porto is the Infante Sagres."})
            search = await client.call_tool("search", {"agent": ALICE, "discussion": SHARED_TALK, "keywords": "planter key"})
            return [remember, search]

    for result in asyncio.run(session()):
        text = result.content[0].text
        assert not result.is_error and not leaks(text), text
    assert any("Infante Sagres" in c for c in _contents(mem, ALICE, SHARED_TALK))
    assert not any("Infante Sagres" in c for c in _contents(mem, BOB, SHARED_TALK))


# ---------------------------------------------------------------------------------------------- finding 4: web pages

EVIL = "http://evil.example"


def test_a_cross_site_text_plain_post_is_refused_and_writes_nothing(open_home):
    mem = open_home["mem"]
    before = head(mem)
    body = json.dumps({"messages": [{"role": "user", "content": "injected"}]})
    with http(open_home) as web:
        for headers in ({"Origin": EVIL, "Content-Type": "text/plain"}, {"Content-Type": "text/plain"},
                        {"Origin": "null", "Content-Type": "application/json"}):
            answer = web.post(f"/v1/agents/{BOB}/discussions/{BOB_TALK}/messages", content=body, headers=headers)
            assert answer.status_code in (403, 415), (headers, answer.status_code, answer.text)
            assert answer.json()["error"]["code"] in ("forbidden", "unsupported_media_type")
        export = web.post("/v1/export", content=json.dumps({"out": str(open_home["home"] / "loot")}),
                          headers={"Origin": EVIL, "Content-Type": "text/plain"})
        assert export.status_code == 403
        stop = web.post("/v1/shutdown", headers={"Origin": EVIL, "Content-Type": "text/plain"})
        assert stop.status_code == 403
        assert web.get("/v1/health").status_code == 200  # still serving
    assert head(mem) == before


def test_a_page_on_another_origin_cannot_read_either(open_home):
    with http(open_home, Origin=EVIL) as web:
        for path in (f"/v1/agents/{BOB}/traces", f"/v1/agents/{BOB}/discussions/{BOB_TALK}/memories", "/v1/models",
                     f"/inspect/api/messages?agent={BOB}&discussion={BOB_TALK}", "/v1/health"):
            answer = web.get(path)
            assert answer.status_code == 403 and not leaks(answer.text), (path, answer.text[:200])
            assert not any(h.lower().startswith("access-control-") for h in answer.headers), answer.headers
        preflight = web.options(f"/v1/agents/{BOB}/recall", headers={
            "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
        assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
    with http(open_home, **{"Sec-Fetch-Site": "cross-site"}) as web:  # a no-cors request (<img>, <script>)
        assert web.get(f"/v1/agents/{BOB}/traces").status_code == 403


def test_a_rebinding_host_is_refused_on_every_interface(open_home):
    port = open_home["url"].rsplit(":", 1)[1]
    with http(open_home, Host=f"rebind.evil.example:{port}") as web:
        for method, path in (("GET", "/v1/health"), ("GET", f"/v1/agents/{BOB}/traces"), ("GET", "/openapi.json"),
                             ("GET", f"/inspect?agent={BOB}"), ("GET", "/v1/models"), ("POST", "/mcp"),
                             ("POST", "/v1/chat/completions"), ("POST", "/v1/sql")):
            answer = web.request(method, path, json={"query": "SELECT 1"})
            assert answer.status_code == 403 and not leaks(answer.text), (method, path, answer.text[:200])
    # The loopback names (with the server's port) and the server's own pages are served.
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        with http(open_home, Host=host, Origin=f"http://{host}") as web:
            assert web.get(f"/v1/agents/{BOB}/traces").status_code == 200
            assert web.post(f"/v1/agents/{BOB}/recall", json={"query": "vault"}).status_code == 200
    with http(open_home, Host="127.0.0.1:1") as web:  # a loopback name with another port: another server's name
        assert web.get("/v1/health").status_code == 403


# ---------------------------------------------------------------------------------------------- finding 5: jobs that write

def wait_job(web, job_id: str) -> dict:
    import time

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        job = web.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in ("succeeded", "failed"):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not end")


def test_a_scoped_key_can_neither_replay_the_shared_shard_nor_write_outside_the_home(keyed, tmp_path):
    loot = tmp_path / "loot"
    with http(keyed, keyed["alice"]) as web:
        for body in ({"agent": ALICE, "out": str(loot)}, {"agent": ALICE}, {"agent": ALICE, "verify": True}):
            answer = web.post("/v1/replay", json=body)
            assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden", (body, answer.text)
    assert not loot.exists()


def test_a_scoped_key_can_neither_reindex_the_home_nor_read_which_agents_need_it(keyed):
    """Re-embedding rebuilds every agent's vectors, and status's embedder section names every agent: admin only."""
    with http(keyed, keyed["alice"]) as web:
        for method, path in (("post", "/v1/reindex"), ("get", "/v1/status")):
            answer = getattr(web, method)(path)
            assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden", (path, answer.text)
            assert BOB not in answer.text
    with http(keyed, keyed["token"]) as web:
        assert web.get("/v1/status").json()["embedder"]["reindex_needed"] is False


def test_jobs_write_only_under_the_home_and_their_files_are_the_owners_alone(keyed, tmp_path):
    outside = tmp_path / "elsewhere"
    inside = keyed["home"] / "exports" / "replay-1"
    with http(keyed, keyed["token"]) as web:
        for path, body in (("/v1/replay", {"out": str(outside)}), ("/v1/export", {"out": str(outside)}),
                           ("/v1/replay", {"out": str(keyed["home"] / ".." / "escape")})):
            answer = web.post(path, json=body)
            assert answer.status_code == 422 and answer.json()["error"]["code"] == "invalid_request", answer.text
            assert "exportRoot" in answer.json()["error"]["message"]
        assert not outside.exists()
        job = web.post("/v1/replay", json={"out": str(inside)}).json()
        assert wait_job(web, job["id"])["state"] == "succeeded"
    modes = {p: stat.S_IMODE(p.stat().st_mode) for p in [inside, *inside.rglob("*")]}
    assert any(p.is_file() for p in modes) and all(m == (0o700 if p.is_dir() else 0o600) for p, m in modes.items()), \
        {str(p): oct(m) for p, m in modes.items() if m not in (0o600, 0o700)}


def test_an_export_root_is_validated_as_a_setting(tmp_path):
    from engram.config.errors import ConfigError
    from engram.config.service import load_service_config

    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"server": {"exportRoot": "relative/dir"}}))
    with pytest.raises(ConfigError) as err:
        load_service_config(home)
    assert "exportRoot" in str(err.value) and "absolute" in str(err.value)
    (home / "engram.json").write_text(json.dumps({"server": {"exportRoot": str(tmp_path / "exports")}}))
    assert load_service_config(home).server.export_root == str(tmp_path / "exports")


# ---------------------------------------------------------------------------------------------- finding 7: remote clients

def test_revoking_the_last_key_stops_serving_remote_clients(tmp_path):
    from starlette.testclient import TestClient

    from engram import __version__
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from engram.server.app import create_app
    from engram.server.instance import Identity

    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"server": {"host": "0.0.0.0"}}))
    mem = Engram(InProcessRuntime(load_service_config(home), groups=["traces"]).start())
    try:
        seed(mem)
        key = cli(home, "keys", "add", "--agents", ALICE).splitlines()[0]
        app = create_app(mem, Identity(home=str(home), token="t" * 32, pid=os.getpid(), version=__version__,
                                       runtime="in-process"))
        remote = TestClient(app, base_url="http://192.0.2.10:8765", client=("192.0.2.77", 40000))
        local = TestClient(app, base_url="http://127.0.0.1:8765", client=("127.0.0.1", 40001))
        path = f"/v1/agents/{ALICE}/traces"
        assert remote.get(path, headers={"Authorization": f"Bearer {key}"}).status_code == 200
        assert remote.get(path).status_code == 401
        cli(home, "keys", "revoke", key.split("-")[1])
        refused = remote.get(path)
        assert refused.status_code == 403 and "loopback" in refused.json()["error"]["message"]
        assert remote.get("/v1/health").status_code == 403
        assert local.get(path).status_code == 200  # the machine's own user keeps the home
        cli(home, "keys", "add", "--agents", ALICE)
        assert remote.get(path).status_code == 401  # a key again: remote clients are served, with their key
    finally:
        mem.close()

"""The inspector served by engram's HTTP app at /inspect (real uvicorn on loopback, the API over the in-process
runtime, no Ray): the page, its data endpoints, the server's JSON errors, access checks, and that looking at
memory (recall included) appends nothing."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from tests.inspect.synthetic import AGENT, DISCUSSION, small_home
from tests.server.helpers import served_home

pytestmark = pytest.mark.server


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=120) as res:
            return res.status, res.headers["Content-Type"], res.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    home = small_home(tmp_path_factory.mktemp("served-inspector"))
    with served_home(home) as mem:
        from engram.server.instance import live_server

        mem.sync_settings(AGENT)
        mem.wait_idle()  # the home's policies have caught up: whatever is appended later, looking appended

        yield mem, live_server(home)["url"]


def events(mem) -> dict:
    return dict(mem.sql("SELECT type, count(*) FROM events_raw GROUP BY type")[1])


def test_the_server_serves_the_inspector_page_and_the_answers_it_asks_for(served):
    mem, url = served
    before = events(mem)
    status, ctype, body = get(f"{url}/inspect")
    assert status == 200 and ctype.startswith("text/html") and f'href="/inspect?agent={AGENT}"' in body
    status, ctype, body = get(f"{url}/inspect?agent={AGENT}")
    assert status == 200 and ctype.startswith("text/html") and len(body) < 200_000
    # Plotly is not inlined in a served page: a versioned asset of the server, which the browser keeps.
    src = re.search(r'<script src="(/inspect/assets/plotly-[0-9.]+\.min\.js)"></script>', body).group(1)
    with urllib.request.urlopen(url + src, timeout=60) as res:
        assert res.headers["Cache-Control"] == "public, max-age=31536000, immutable"
        assert "plotly.js v" in res.read(2_000).decode()
    data = json.loads(re.search(r'<script id="engram-data" type="application/json">(.*?)</script>', body, re.S).group(1))
    assert data["mode"] == "served" and data["base"] == "/inspect/api" and data["discussion"] == DISCUSSION
    status, _, body = get(f"{url}/inspect/api/traces?agent={AGENT}&limit=2")
    traces = json.loads(body)
    expected = mem.sql("SELECT count(*) FROM memory_traces WHERE agent = ? AND active", [AGENT])[1][0][0]
    assert status == 200 and len(traces["rows"]) == 2 and traces["total"] == expected
    # A recall explained, live: ranked hits with their six factors; a look, not a retrieval.
    status, _, body = get(f"{url}/inspect/api/recall?agent={AGENT}&query=Lisbon&discussion={DISCUSSION}")
    recall = json.loads(body)
    assert status == 200 and recall["hits"] and recall["factor_order"] == [
        "similarity", "activation", "strength", "recency", "emotional", "importance"]
    assert events(mem) == before  # looking appended nothing: no TraceRetrieved, no settings, nothing


def test_refusals_are_the_servers_json_errors(served):
    _, url = served
    status, ctype, body = get(f"{url}/inspect/api/traces?agent={AGENT}&limit=x")
    assert status == 422 and ctype == "application/json"
    assert json.loads(body)["error"]["code"] == "invalid_request" and "limit" in json.loads(body)["error"]["message"]
    status, _, body = get(f"{url}/inspect?agent=nobody")
    assert status == 404 and json.loads(body)["error"]["code"] == "unknown_agent"
    status, _, body = get(f"{url}/inspect/api/lineage?agent={AGENT}&seq=99999")
    assert status == 404 and json.loads(body)["error"]["code"] == "not_found"
    status, _, body = get(f"{url}/inspect/api/nothing?agent={AGENT}")
    assert status == 422 and "unknown view 'nothing'" in json.loads(body)["error"]["message"]
    status, _, body = get(f"{url}/inspect?agent=..%2Fx")
    assert status == 400 and json.loads(body)["error"]["code"] == "invalid_id"


def test_a_principal_sees_only_its_own_agents_in_the_inspector(served, monkeypatch):
    from engram.server import auth

    _, url = served
    monkeypatch.setattr(auth, "authenticate", lambda request: auth.Principal("other", frozenset({"someone-else"})))
    status, _, body = get(f"{url}/inspect")
    assert status == 200 and f"agent={AGENT}" not in body
    for path in (f"/inspect?agent={AGENT}", f"/inspect/api/timeline?agent={AGENT}", f"/inspect/api/traces?agent={AGENT}"):
        status, _, body = get(url + path)
        assert status == 404 and json.loads(body)["error"]["code"] == "unknown_agent", path


def test_the_inspector_is_not_an_operation_of_the_openapi_document(served):
    _, url = served
    _, _, body = get(f"{url}/openapi.json")
    assert not [p for p in json.loads(body)["paths"] if p.startswith("/inspect")]


def test_inspect_without_out_prints_the_served_pages_url(served, capsys):
    from engram.cli.main import main

    mem, url = served
    home = mem.home.root
    assert main(["--home", str(home), "inspect", "--agent", AGENT, "--discussion", DISCUSSION]) == 0
    printed = capsys.readouterr().out.split()[0]
    assert printed == f"{url}/inspect?agent={AGENT}&discussion={DISCUSSION}"
    status, ctype, body = get(printed)
    assert status == 200 and ctype.startswith("text/html") and f'"discussion":"{DISCUSSION}"' in body
    assert main(["--home", str(home), "inspect", "--agent", "nobody"]) == 2
    err = capsys.readouterr().err
    assert "agent 'nobody'" in err and err.count("\n") == 1
    assert main(["--home", str(home), "inspect", "--agent", AGENT, "--query", "Lisbon"]) == 2
    assert "--query and --no-recall go with --out" in capsys.readouterr().err

"""REST over real HTTP on loopback: one resource per operation, scoped per agent; every refusal a JSON error with a
stable code and nothing appended; the OpenAPI document; engram.Client and AsyncClient returning the API's types.

The app is served from the test process (uvicorn on 127.0.0.1) over the in-process runtime: real DuckDB, the
real policies and embedder, no Ray (the Ray Serve test runs the same checks on Ray).
"""

from __future__ import annotations

import asyncio
import http.client
import json
from urllib.parse import urlsplit

import pytest
from tests.cli.helpers import SAMPLE

from engram.api import types as t
from engram.api.errors import ApiError

AGENT = "priya"
DISCUSSION = "acme-dashboard"
MAX_BODY = 256 * 1024


def sample_conversations():
    from engram.events.envelope import from_us
    from engram.memory.ingest.formats import parse_file

    return [t.Conversation(discussion=c.discussion, messages=[
        t.Message(role=m.role, content=m.content, ts=from_us(m.ts_us), name=m.name, message_id=m.message_id)
        for m in c.messages]) for c in parse_file(SAMPLE, now_us=0)]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    home = tmp_path_factory.mktemp("rest") / "home"
    home.mkdir()
    mem = Engram(InProcessRuntime(load_service_config(home)).start())
    with Served(mem, max_body_bytes=MAX_BODY) as server:
        with server.client() as client:
            client.append_conversations(AGENT, sample_conversations())
        yield server
    mem.close()


def request(served, method: str, path: str, body: bytes | str | None = None, headers: dict | None = None):
    parts = urlsplit(served.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request(method, path, body=body.encode() if isinstance(body, str) else body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def head(served) -> int:
    return sum(served.api.rt.heads().values())


def test_a_client_appends_searches_and_recalls_through_http(served):
    with served.client() as client:
        again = client.append_conversations(AGENT, sample_conversations())
        assert [(r.appended, r.duplicates) for r in again.results] == [(0, 45)]  # recognised by message id
        found = client.search(AGENT, DISCUSSION, "Supabase;deadline", mode="keyword", limit=3)
        assert isinstance(found, t.SearchResponse) and found.hits and found.mode == "keyword"
        recalled = client.recall(AGENT, "Which CSS approach does Priya dislike?", discussion=DISCUSSION, limit=3)
        assert isinstance(recalled, t.RecallResponse) and len(recalled.hits) == 3
        top = recalled.hits[0]
        assert set(top.factors) == {"strength", "similarity", "recency", "emotional", "activation", "importance"}
        assert top.score == pytest.approx(sum(top.contributions.values()), abs=1e-5)
        assert top.sources and top.sources[0].discussion == DISCUSSION
        assert client.discussion(DISCUSSION).agent == AGENT
        memories = client.memories(AGENT, DISCUSSION, last=2)
        assert memories.exists and memories.total >= 2 and len(memories.memories) == 2
        status = client.status()
        assert status.shards[0].head == head(served) and status.runtime == "in-process (no Ray)"


def test_the_async_client_returns_the_same_types(served):
    from engram.client import AsyncClient

    async def go():
        async with AsyncClient(served.url) as client:
            st = await client.status()
            res = await client.sql("SELECT count(*) AS n FROM messages WHERE agent = ?", [AGENT])
            with pytest.raises(ApiError) as refused:
                await client.traces("nobody")
            return st, res, refused.value

    st, res, refused = asyncio.run(go())
    assert isinstance(st, t.StatusResponse) and res.rows == [[45]]
    assert refused.code == "unknown_agent" and refused.status == 404


REFUSALS = [
    # (method, path, body, status, code)
    ("POST", f"/v1/agents/a%20b/discussions/{DISCUSSION}/messages", {"messages": [{"role": "user", "content": "x"}]},
     400, "invalid_id"),
    ("POST", f"/v1/agents/{AGENT}/discussions/bad..id/messages", {"messages": [{"role": "user", "content": "x"}]},
     400, "invalid_id"),
    ("POST", f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages", {"messages": [{"role": "wizard", "content": "x"}]},
     422, "invalid_request"),
    ("POST", f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages", {"messages": []}, 422, "invalid_request"),
    ("POST", f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages",
     {"messages": [{"role": "user", "content": "x", "sentiment": "happy"}]}, 422, "invalid_request"),
    ("POST", f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages",
     {"messages": [{"role": "user", "content": "x" * 100_001}]}, 422, "malformed_messages"),
    ("POST", f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages", "{not json", 422, "invalid_request"),
    ("POST", f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages",
     {"messages": [{"role": "user", "content": "x", "ts": "1600-01-01T00:00:00Z"}]}, 422, "invalid_request"),
    ("POST", "/v1/agents/nobody/recall", {"query": "anything"}, 404, "unknown_agent"),
    ("POST", f"/v1/agents/{AGENT}/recall", {"query": "   "}, 400, "bad_query"),
    ("POST", f"/v1/agents/{AGENT}/recall", {"query": "x", "weights": {"charm": 1}}, 422, "invalid_request"),
    ("GET", f"/v1/agents/{AGENT}/discussions/no-such-thing/summary", None, 404, "unknown_discussion"),
    ("PUT", f"/v1/agents/{AGENT}/mood", {"valence": 2, "arousal": 0, "dominance": 0}, 422, "invalid_request"),
    ("POST", "/v1/sql", {"query": "SELECT * FROM no_such_table"}, 400, "bad_query"),
    ("GET", "/v1/jobs/job-nope-1", None, 404, "unknown_job"),
    ("GET", "/v1/jobs/..", None, 400, "invalid_id"),
    ("GET", "/v1/nowhere", None, 404, "not_found"),
    ("DELETE", "/v1/status", None, 405, "method_not_allowed"),
    ("GET", f"/v1/agents/{AGENT}/traces?limit=zero", None, 422, "invalid_request"),
    ("POST", f"/v1/agents/{AGENT}/workflows/run", {"nodes": [{"type": "Nonsense"}]}, 400, "bad_workflow"),
]


@pytest.mark.parametrize("method,path,body,status,code", REFUSALS, ids=[f"{r[0]} {r[1][:40]} {r[4]}" for r in REFUSALS])
def test_every_refused_request_gets_a_json_error_and_appends_nothing(served, method, path, body, status, code):
    before = head(served)
    payload = body if isinstance(body, str) or body is None else json.dumps(body)
    got, doc = request(served, method, path, payload,
                       {"Content-Type": "application/json"} if payload or method != "GET" else None)
    assert (got, doc["error"]["code"]) == (status, code), doc
    assert set(doc) == {"error"} and doc["error"]["message"]
    assert head(served) == before


def test_a_body_over_the_limit_is_refused_with_413_before_it_is_read(served):
    before = head(served)
    big = json.dumps({"messages": [{"role": "user", "content": "y" * (MAX_BODY + 10)}]})
    status, doc = request(served, "POST", f"/v1/agents/{AGENT}/discussions/{DISCUSSION}/messages", big,
                          {"Content-Type": "application/json"})
    assert status == 413 and doc["error"]["code"] == "body_too_large"
    assert "server.maxBodyBytes" in doc["error"]["message"]
    assert head(served) == before


def test_the_openapi_document_describes_every_operation_and_its_errors(served):
    status, doc = request(served, "GET", "/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.")
    paths = doc["paths"]
    for path, method in [
        ("/v1/agents/{agent}/recall", "post"), ("/v1/agents/{agent}/discussions/{discussion}/messages", "post"),
        ("/v1/agents/{agent}/discussions/{discussion}/search", "post"), ("/v1/sql", "post"), ("/v1/status", "get"),
        ("/v1/agents/{agent}/working-memory", "put"), ("/v1/agents/{agent}/mood", "get"), ("/v1/replay", "post"),
        ("/v1/jobs/{job_id}", "get"), ("/v1/agents/{agent}/discussions/{discussion}", "delete"),
        ("/v1/agents/{agent}/workflows/run", "post"), ("/v1/agents/{agent}/discussions/{discussion}/chat", "post"),
    ]:
        assert method in paths[path], path
    recall = paths["/v1/agents/{agent}/recall"]["post"]
    assert recall["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/RecallRequest")
    assert recall["responses"]["404"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    schemas = doc["components"]["schemas"]
    assert {"RecallRequest", "RecallResponse", "Message", "ErrorResponse", "Job"} <= set(schemas)
    assert "HTTPValidationError" not in schemas


def test_replay_and_verify_are_jobs_with_progress(served, tmp_path):
    with served.client() as client:
        job = client.replay(verify=True)
        assert job.kind == "verify" and job.progress.total == 1 and job.id.startswith("job-")
        done = client.wait_job(job.id, timeout=120)
        assert done.state == "succeeded" and done.progress.done == 1
        assert done.result == {"identical": True, "differences": []}
        replayed = served.home / "exports" / "replayed"  # jobs write under the home (or server.exportRoot) only
        out = client.wait_job(client.replay(out=str(replayed)).id, timeout=120)
        assert out.state == "succeeded" and out.result["shards"][0]["events"] == head(served)
        assert (replayed / "shard-000.duckdb").exists()
        with pytest.raises(ApiError) as refused:
            client.replay(out=str(replayed))
        assert refused.value.code == "conflict"
        assert client.job(job.id).state == "succeeded" and job.id in [j.id for j in client.jobs().jobs]


def test_an_llm_outage_answers_503_with_the_cause_and_keeps_the_users_message(tmp_path, monkeypatch):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    monkeypatch.setenv("ENGRAM_TEST_LLM_KEY", "not-a-real-key")
    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"llm": {"provider": "anthropic", "endpoints": {"default": {
        "baseUrl": "http://127.0.0.1:9", "apiKeyEnv": "ENGRAM_TEST_LLM_KEY", "maxRetries": 0, "timeoutSeconds": 2}}}}))
    # Memory creation runs behind the chat, never in its path: only the chat's own reply meets the outage here.
    mem = Engram(InProcessRuntime(load_service_config(home), groups=["traces"]).start())
    try:
        with Served(mem) as server:
            status, doc = request(server, "POST", "/v1/agents/ada/discussions/talk/chat",
                                  json.dumps({"message": "Remember that my sister is called Ines."}),
                                  {"Content-Type": "application/json"})
            assert status == 503 and doc["error"]["code"] == "llm_unavailable"
            assert doc["error"]["message"].startswith("the LLM failed:")
            _, rows = mem.sql("SELECT role, content FROM messages WHERE discussion_id = 'talk'")
            assert rows == [("user", "Remember that my sister is called Ines.")]
    finally:
        mem.close()


def test_a_post_after_the_server_closed_an_idle_connection_is_answered(served, tmp_path):
    """uvicorn closes a kept-alive connection after its idle timeout (5 s as served; 1 s here, so that the test does
    not wait 6 s); the client (which retries no POST) must not write a query into that socket: it used to fail
    with BrokenPipeError."""
    import time

    from tests.server.helpers import Served

    with Served(served.api, tmp_path, keep_alive_s=1) as quick, quick.client() as client:
        before = client.sql("SELECT count(*) AS n FROM messages")
        time.sleep(2.5)
        after = client.sql("SELECT count(*) AS n FROM messages")
    assert after.rows == before.rows and before.rows[0][0] > 0

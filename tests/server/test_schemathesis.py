"""Generated requests from the server's own /openapi.json (schemathesis): no answer is a 5xx, every refusal is a
JSON error, and nothing is appended by a refused request. Bounded: a few examples per operation."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from tests.server.test_rest import AGENT, sample_conversations

pytestmark = pytest.mark.server

# Left out: /v1/shutdown stops the server under test; /v1/replay and /v1/export write into any directory a generated
# `out` names; /v1/reshard grows the home under test (tests/cluster covers it).
# /v1/regenerate needs Claude's Message Batches API (tests/memory/discussion/test_batch_regeneration.py covers it).
EXCLUDED = ("/v1/shutdown", "/v1/replay", "/v1/export", "/v1/reshard", "/v1/regenerate")
EXAMPLES = 4  # per operation: about 150 requests in all
STREAMING = ("/v1/events",)  # Server-Sent Events: asked with follow=false


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    home = tmp_path_factory.mktemp("schemathesis") / "home"
    home.mkdir()
    # Memory creation is not what is tested here: only the trace reader runs, so each write stays quick.
    mem = Engram(InProcessRuntime(load_service_config(home), groups=["traces"]).start())
    with Served(mem, max_body_bytes=1 << 20) as server:
        with server.client() as client:
            client.append_conversations(AGENT, sample_conversations())
        yield server
    mem.close()


def settle(served) -> None:
    import time

    deadline = time.monotonic() + 300
    while served.api.jobs.running() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_generated_requests_never_get_a_5xx_and_refusals_append_nothing(served):
    from hypothesis import given

    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    operations = [op.ok() for op in schema.get_all_operations()]
    tried = []
    for op in operations:
        if op.path in EXCLUDED:
            continue

        @given(case=op.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
        def check(case):
            settle(served)  # jobs an accepted request started (a forget, a regeneration) append as they run
            before = sum(served.api.rt.heads().values())
            if case.path in STREAMING:  # what the stream holds now, then its end (not followed for ever)
                case.query = {**(case.query or {}), "follow": "false"}
            response = case.call(base_url=served.url, timeout=120)
            tried.append((case.method, case.path, response.status_code))
            assert response.status_code < 500, (case.method, case.formatted_path, response.text[:500])
            if response.status_code >= 400:
                body = response.json()
                if case.path.startswith("/api/"):  # the Ollama door answers in Ollama's shape: {"error": "<message>"}
                    assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"], body
                else:
                    assert set(body) == {"error"} and body["error"]["code"] and body["error"]["message"], body
                assert sum(served.api.rt.heads().values()) == before, (case.method, case.formatted_path, body)

        check()
    assert len({(m, p) for m, p, _ in tried}) == len(operations) - len(EXCLUDED)
    assert any(code >= 400 for _, _, code in tried) and any(code < 300 for _, _, code in tried)

"""`engram llm check` (and `POST /v1/llm/check`): each endpoint called once, one line each, what to fix when wrong.

Upstreams: the real llama.cpp server, the Ollama STAND-IN (standins.py), a closed port, an unset key.
"""

from __future__ import annotations

import json

import pytest

from engram.config.llm import Endpoint, LlmConfig
from engram.providers.llm.check import check_all, check_endpoint
from tests.providers.endpoints.llama_server import free_port
from tests.providers.endpoints.standins import OllamaStandIn

pytestmark = pytest.mark.llama

QUICK = {"max_retries": 0, "timeout_seconds": 10}


def test_llama_cpp_server_check_says_model_latency_json_way_and_window(llama):
    check = check_endpoint("local", Endpoint(api_type="openAIChatCompletion", base_url=llama.url, model="tiny",
                                             max_context_tokens=2048, **QUICK), env={})
    assert check.ok and check.model == "tiny" and check.latency_ms > 0
    assert check.structured == "json_object_schema"  # it refused json_schema; the check stepped down and says so
    assert (check.context_window, check.context_source, check.local) == (2048, "maxContextTokens", True)
    assert check.line().startswith(f"local: openAIChatCompletion at {llama.url}, answered as tiny, ")
    assert "JSON: json_object_schema" in check.line() and "window 2,048 tokens (maxContextTokens)" in check.line()
    assert "the server reports no token usage" not in check.line()


def test_a_llama_cpp_server_without_a_configured_window_is_told_to_set_it(llama):
    check = check_endpoint("local", Endpoint(api_type="openAIV1Completion", base_url=llama.url, **QUICK), env={})
    assert check.ok and check.structured == "grammar" and check.context_window is None
    assert "window unknown: set maxContextTokens" in check.line()


def test_problems_are_one_line_each_with_what_to_fix():
    ollama = OllamaStandIn().start()
    try:
        config = LlmConfig(provider="auto", endpoints={
            "default": Endpoint(api_type="ollamaApiChat", base_url=ollama.url, model="llama3.2:3b", **QUICK),
            "dead": Endpoint(api_type="openAIChatCompletion", base_url=f"http://127.0.0.1:{free_port()}", **QUICK),
            "claude": Endpoint(api_type="claudeMessages", api_key_env="ENGRAM_TEST_UNSET_KEY"),
            "heuristic": Endpoint(api_type="offline"),
        })
        checks = {c.endpoint: c for c in check_all(config, env={})}
    finally:
        ollama.stop()
    assert not checks["default"].ok and "run `ollama pull llama3.2:3b`" in checks["default"].problem
    assert not checks["dead"].ok and "cannot reach" in checks["dead"].problem
    assert "check llm.endpoints.dead.baseUrl" in checks["dead"].problem
    assert not checks["claude"].ok and "ENGRAM_TEST_UNSET_KEY is not set" in checks["claude"].problem
    assert checks["heuristic"].ok and "no call" in checks["heuristic"].line()
    assert all("\n" not in c.line() for c in checks.values())


@pytest.mark.server
def test_the_cli_prints_one_line_per_endpoint_through_the_api(llama, tmp_path, capsys):
    from engram.cli.main import main
    from tests.server.helpers import served_home

    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"llm": {"endpoints": {
        "default": {"apiType": "openAIChatCompletion", "baseUrl": llama.url, "model": "tiny",
                    "maxContextTokens": 2048, "maxRetries": 0},
        "spare": {"apiType": "openAIChatCompletion", "baseUrl": f"http://127.0.0.1:{free_port()}", "maxRetries": 0},
    }}}))
    with served_home(home):
        code = main(["--home", str(home), "llm", "check"])
        out = capsys.readouterr().out.splitlines()
        assert code == 1  # one endpoint failed
        assert out[0] == f"LLM: openAIChatCompletion tiny at {llama.url} (endpoint 'default')"
        assert out[1].startswith("default: openAIChatCompletion") and "answered as tiny" in out[1]
        assert out[2].startswith("spare: openAIChatCompletion") and "FAILED — " in out[2] and "cannot reach" in out[2]
        assert main(["--home", str(home), "llm", "check", "--json"]) == 1
        data = json.loads(capsys.readouterr().out)
        assert [e["endpoint"] for e in data["endpoints"]] == ["default", "spare"]
        assert data["endpoints"][0]["structured"] == "json_object_schema"

"""The `llm_costs` view (`engram costs`): per agent, endpoint and model, "local" for a server the user runs, the
dollars for a billed API; a key scoped to one agent sees only that agent's rows (SQL through the API, no Ray)."""

from pathlib import Path

import pytest

from engram.events.discussion import ChunkSummarized
from engram.events.envelope import NewEvent, Write
from engram.events.provenance import LlmCall
from engram.shard.host import ShardHost

T0 = 1_772_438_400 * 1_000_000


def summary(n: int, llm: LlmCall) -> NewEvent:
    return NewEvent(ChunkSummarized(generation=0, first_seq=1, last_seq=2, message_ids=("m1",), token_count=40,
                                    summary=f"summary {n}", llm=llm), T0 + n, event_id=f"s{n}")


@pytest.fixture
def home(tmp_path) -> Path:
    local = LlmCall(provider="ollamaApiChat", model="llama3.1:8b", task="summarize_chunk", prompt_hash="h",
                    endpoint="local", input_tokens=900, output_tokens=80, local=True)
    billed = LlmCall(provider="anthropic", model="claude-sonnet-5-5", task="summarize_chunk", prompt_hash="h",
                     endpoint="default", input_tokens=1000, output_tokens=100, cost_usd=0.003)
    host = ShardHost(tmp_path / "log" / "shard-000.duckdb", tmp_path / "projections", background=False)
    host.append_many([Write("trip", "alice", (summary(1, local), summary(2, local))),
                      Write("work", "bob", (summary(3, billed),))])
    host.catch_up()
    host.close()
    return tmp_path


def test_the_cost_view_says_local_for_a_server_the_user_runs_and_a_scoped_key_sees_its_own_rows(home):
    from engram.api import types as t
    from engram.api.service import Api
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    api = Api(InProcessRuntime(load_service_config(home), groups=[], wall_clock=False, auto_settle=False).start())
    try:
        query = t.SqlRequest(query="SELECT agent, endpoint, calls, input_tokens, usd, cost FROM llm_costs")
        assert api.run_sql(query).rows == [["alice", "local", 2, 1800, 0.0, "local"],
                                           ["bob", "default", 1, 1000, 0.003, "$0.0030"]]
        assert api.run_sql(query, agents=["alice"]).rows == [["alice", "local", 2, 1800, 0.0, "local"]]
    finally:
        api.close()

"""Mixed routing: chunk summaries from a real llama.cpp server, observations and reflections from the suite's local
STAND-IN of the Anthropic Messages API (`FakeMessagesApi`), each recorded on its own `LlmCall`; then both servers
stop and a replay rebuilds every projection byte for byte with zero calls.

A real shard (DuckDB log and projections) and the real Summarizer, Observer and Reflector policies in this process
(the background harness; no Ray).
"""

from __future__ import annotations

import json

import pytest

from engram.config.agent import AgentConfig
from engram.config.discussion import SETTINGS_FILE_NAME, DiscussionSettings
from engram.config.llm import Endpoint, LlmConfig, Preset, TaskRoute
from engram.config.recorded import SCOPE_AGENT, SCOPE_DISCUSSION
from engram.config.service import ServiceConfig
from engram.events.envelope import NewEvent, Write
from engram.kernel.ids import agent_stream
from engram.memory.ingest.messages import IncomingMessage
from engram.memory.settings import settings_event
from engram.policies.observer import Observer
from engram.policies.reflector import Reflector
from engram.policies.summarizer import Summarizer
from engram.providers.llm.factory import make_tasks
from tests.memory.background.harness import CountingTasks, Pipeline
from tests.providers.endpoints.llama_server import LlamaServer
from tests.providers.llm.fake_messages_api import FAST_RETRIES, FakeMessagesApi

pytestmark = pytest.mark.llama

AGENT, DISCUSSION = "ada", "lisbon-trip"
T0, MINUTE = 1_772_438_400 * 1_000_000, 60 * 1_000_000

NOTES = {"notes": [{"type": "factual", "text": "Ada is moving to Lisbon in May.", "importance": 0.8,
                    "entities": ["Ada", "Lisbon"], "lines": [1]}]}
REFLECTION = {"traces": [{"content": "Ada is moving to Lisbon in May.", "trace_type": "semantic", "importance": 0.8,
                          "confidence": 0.8, "note_ids": [], "entities": ["Ada", "Lisbon"], "tags": ["move"]}],
              "contradictions": []}


def claude_answer(body: dict) -> str:
    system = body["system"][0]["text"]
    if system.startswith("You are the Reflector"):
        return json.dumps(REFLECTION)
    if system.startswith("You are the Observer"):
        return json.dumps(NOTES)
    raise AssertionError(f"a task routed to the llama.cpp server reached the Claude stand-in: {system[:80]}")


@pytest.fixture
def world(tmp_path):
    (tmp_path / "llama").mkdir()
    llama = LlamaServer(tmp_path / "llama", n_ctx=2048).start()
    claude = FakeMessagesApi().start()
    claude.answer = claude_answer
    llm = LlmConfig(
        endpoints={
            "default": Endpoint(api_type="openAIChatCompletion", base_url=llama.url, model="tiny", max_context_tokens=2048,
                                chars_per_token=0.7, max_retries=0, timeout_seconds=30),
            "claude": Endpoint(base_url=claude.url, api_key_env="ENGRAM_TEST_CLAUDE_KEY", timeout_seconds=5,
                               **FAST_RETRIES),
        },
        presets={"default": Preset(temperature=0, max_tokens=120)},
        tasks={"observe": TaskRoute(endpoint_name="claude"), "reflect": TaskRoute(endpoint_name="claude")},
    )
    config = ServiceConfig().model_copy(update={"llm": llm})
    tasks = CountingTasks(make_tasks(llm, env={"ENGRAM_TEST_CLAUDE_KEY": "test-key"}))
    pipeline = Pipeline(tmp_path / "home", {"config": config, "tasks": tasks}, policies=(Summarizer, Observer, Reflector))
    yield pipeline, tasks, llama, claude
    pipeline.close()
    llama.stop()
    claude.stop()


def test_summaries_come_from_llama_cpp_and_reflections_from_claude_and_replay_calls_neither(world):
    pipeline, tasks, llama, claude = world
    # Auto-ingest is not hosted here: switched off, so that the Reflector does not wait for it.
    agent = AgentConfig.model_validate({"memory": {"observer": {"activationTokens": 60, "bufferTokens": 0},
                                                   "reflector": {"activationTokens": 5},
                                                   "encoding": {"encodeMessages": False}},
                                        "storage": {"autoIngest": {"enabled": False}}})
    discussion = DiscussionSettings.model_validate({"chunkEstimatedTokenSize": 60, "maxMessagesBetweenChunks": 4,
                                                    "lookbackStartTurn": 0})
    pipeline.shard.append_many([Write(agent_stream(AGENT), AGENT, (
        NewEvent(settings_event(SCOPE_AGENT, "agent.config.json", agent), T0, event_id="settings:agent"),
        NewEvent(settings_event(SCOPE_DISCUSSION, SETTINGS_FILE_NAME, discussion), T0, event_id="settings:disc"),
    ))])
    said = [IncomingMessage(role=("user", "assistant")[n % 2], ts_us=T0 + n * MINUTE, message_id=f"m{n}",
                            content=f"Turn {n}: Ada says she is moving to Lisbon in May with her sister Ines.")
            for n in range(12)]
    pipeline.say(AGENT, DISCUSSION, said)
    pipeline.settle()

    summaries = [r.event.llm for r in pipeline.events("ChunkSummarized")]
    observed = [r.event.llm for r in pipeline.events("ObservationsRecorded")]
    reflected = [r.event.llm for r in pipeline.events("Reflected")]
    assert summaries and observed and reflected, [(c.task, c.error) for c in summaries]
    assert {(c.provider, c.endpoint, c.model, c.cost_usd, c.error) for c in summaries} == {
        ("openAIChatCompletion", "default", "tiny", 0.0, None)}
    assert {(c.provider, c.endpoint, c.model, c.structured, c.error) for c in reflected} == {
        ("anthropic", "claude", "claude-sonnet-5-5", "output_format", None)}
    assert {(c.endpoint, c.error) for c in observed} == {("claude", None)}
    assert all(c.cost_usd > 0 for c in reflected)  # Claude is billed; the local server is not
    assert {c.local for c in summaries} == {True} and {c.local for c in reflected} == {False}
    # The cost view (`engram costs`, `engram sql "SELECT * FROM llm_costs"`) says "local" for the server the user runs.
    from engram.sql.views import llm_costs_sql

    cols, rows = pipeline.sql(llm_costs_sql("events"))
    costs = {(r["endpoint"], r["model"]): r for r in (dict(zip(cols, row)) for row in rows)}
    local = costs[("default", "tiny")]
    assert (local["cost"], local["usd"]) == ("local", 0.0) and local["calls"] >= len(summaries)
    billed = costs[("claude", "claude-sonnet-5-5")]
    assert billed["usd"] > 0 and billed["cost"] == f"${billed['usd']:.4f}"

    calls, claude_requests = tasks.total, len(claude.requests)
    llama.stop()
    claude.stop()
    assert pipeline.shard.verify_replay() == []  # every projection rebuilt from the log, byte for byte
    assert (tasks.total, len(claude.requests)) == (calls, claude_requests)  # zero calls: both servers are gone

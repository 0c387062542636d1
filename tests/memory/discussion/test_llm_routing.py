"""Which endpoint and preset each discussion-memory call uses, pinned through the recorded `LlmCall`s.

An in-process engram (real log, projections and Summarizer) whose LLM is the anthropic provider
talking to the local fake Messages API, with two endpoints on different models.
"""

from __future__ import annotations

import json

import pytest
from tests.memory.discussion.conftest import AGENT, events, ingest, messages, write_settings
from tests.memory.discussion.engine import LocalEngine, LocalMemory
from tests.providers.llm.fake_messages_api import FAST_RETRIES, FakeMessagesApi

from engram.config.errors import ConfigError
from engram.config.llm import Endpoint, LlmConfig, Preset
from engram.memory.discussion.workflow import ChatMessage, Responder, RunContext, parse, run

SONNET, HAIKU = "claude-sonnet-5-5", "claude-haiku-4-5"
MEMORY_JSON = {"title": "Launch plans", "summary": "They planned the launch.", "entities": ["Stardust"],
               "key_phrases": ["launch plans"], "sentiment": "neutral", "topics": ["space"]}


def answer(body: dict) -> str:
    if body["system"][0]["text"].startswith("You turn a conversation excerpt into one structured"):
        return json.dumps(MEMORY_JSON)
    return f"Answered by {body['model']}."


@pytest.fixture
def routed(tmp_path, monkeypatch):
    from engram.config.service import load_service_config

    api = FakeMessagesApi().start()
    api.answer = answer
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    home = tmp_path / "home"
    home.mkdir()
    endpoint = {**FAST_RETRIES, "timeout_seconds": 5.0, "base_url": api.url}
    llm = LlmConfig(
        provider="anthropic",
        endpoints={"default": Endpoint(model=SONNET, **endpoint), "writer": Endpoint(model=HAIKU, **endpoint)},
        presets={"default": Preset(), "json": Preset(temperature=0.0, max_tokens=700)},
    )
    engine = LocalEngine(home, load_service_config(home).model_copy(update={"llm": llm}))
    yield engine, api
    engine.close()
    api.stop()


def routes(records) -> list[tuple[str, str]]:
    return [(r.event.llm.endpoint, r.event.llm.model) for r in records]


def test_chunk_memories_use_the_settings_endpoint_and_vector_memories_their_own(routed):
    engine, api = routed
    write_settings(engine.home.root, endpointName="writer", vectorMemoryEndpointName="default", vectorMemoryPreset="json")
    ingest(engine, "d", messages(14))
    chunks, vectors = events(engine, "d", "ChunkSummarized"), events(engine, "d", "VectorMemoryStored")
    assert len(chunks) == 2 and len(vectors) == 2
    assert set(routes(chunks)) == {("writer", HAIKU)}
    assert set(routes(vectors)) == {("default", SONNET)}
    vector_bodies = [b for b in api.requests if "structured" in b["system"][0]["text"]]
    # The settings' vectorMemoryMaxResponseSizeInTokens (1024), capped by the preset's maxTokens (700).
    assert {(b["model"], b["temperature"], b["max_tokens"]) for b in vector_bodies} == {(SONNET, 0.0, 700)}
    assert chunks[0].event.summary == f"Answered by {HAIKU}."


def test_vector_memories_fall_back_to_the_general_endpoint_and_preset(routed):
    engine, api = routed
    write_settings(engine.home.root, endpointName="writer", preset="json")
    ingest(engine, "d", messages(9))
    assert set(routes(events(engine, "d", "ChunkSummarized", "VectorMemoryStored"))) == {("writer", HAIKU)}
    assert {b["temperature"] for b in api.requests} == {0.0}


def test_without_names_every_memory_task_takes_its_configured_route(routed):
    engine, _ = routed
    ingest(engine, "d", messages(9))
    assert set(routes(events(engine, "d", "ChunkSummarized", "VectorMemoryStored"))) == {("default", SONNET)}


def test_a_summary_node_names_its_own_endpoint_else_the_settings_one(routed):
    engine, _ = routed
    write_settings(engine.home.root, endpointName="writer")
    ingest(engine, "d", messages(30))
    memory = LocalMemory(engine, AGENT)
    memory.request_summary("d", "chatSummarySummarizer", min_memories_per_summary=1, loop_if_memories_exceed=3,
                           endpoint_name="default")
    ingest(engine, "d", messages(10, start=30))
    memory.request_summary("d", "chatSummarySummarizer", min_memories_per_summary=1, loop_if_memories_exceed=3)
    updates = events(engine, "d", "RollingSummaryUpdated")
    assert routes(updates)[0] == ("default", SONNET) and routes(updates)[-1] == ("writer", HAIKU)


def test_standard_nodes_respond_through_their_own_endpoint(routed):
    engine, api = routed
    ingest(engine, "d", messages(9))
    wf = parse([
        {"id": "recent", "type": "RecentMemorySummarizerTool"},
        {"id": "fast", "type": "Standard", "endpointName": "writer", "preset": "json", "maxResponseSizeInTokens": 60,
         "prompt": "Memories: {recent}\nUser: {chat_user_prompt_last_one}", "returnToUser": True},
        {"id": "plain", "type": "Standard", "systemPrompt": "Be brief."},
    ], "w.json")
    ctx = RunContext(discussion="d", messages=[ChatMessage("user", "What did we plan?")],
                     memory=LocalMemory(engine, AGENT), responder=Responder(engine.services["tasks"]))
    out = run(wf, ctx)
    by_id = {r.id: r for r in out.results}
    assert (by_id["fast"].llm.task, by_id["fast"].llm.endpoint, by_id["fast"].llm.model) == ("respond", "writer", HAIKU)
    assert (by_id["plain"].llm.endpoint, by_id["plain"].llm.model) == ("default", SONNET)
    assert out.response == f"Answered by {HAIKU}." and "via endpoint 'writer'" in by_id["fast"].info
    fast_body, plain_body = api.requests[-2:]
    assert (fast_body["max_tokens"], fast_body["temperature"]) == (60, 0.0)
    assert fast_body["messages"] == [{"role": "user", "content": f"Memories: Answered by {SONNET}.\nUser: What did we plan?"}]
    assert plain_body["messages"] == [{"role": "user", "content": "What did we plan?"}]


def test_a_settings_file_naming_an_unknown_endpoint_stops_before_anything_is_recorded(routed):
    engine, api = routed
    write_settings(engine.home.root, vectorMemoryEndpointName="writter")
    with pytest.raises(ConfigError, match="vectorMemoryEndpointName names endpoint 'writter'.*did you mean 'writer'"):
        ingest(engine, "d", messages(9))
    assert engine.shard.head() == 0 and api.requests == []


def test_a_memory_workflow_naming_an_unknown_endpoint_falls_back_on_record(routed):
    engine, _ = routed
    workflows = engine.home.root / "workflows"
    workflows.mkdir()
    (workflows / "mine.json").write_text(json.dumps([{"type": "Standard", "endpointName": "nope", "prompt": "[TextChunk]"}]))
    write_settings(engine.home.root, fileMemoryWorkflowName="mine", endpointName="writer")
    ingest(engine, "d", messages(9))
    chunk = events(engine, "d", "ChunkSummarized")[0].event
    assert "endpointName names endpoint 'nope', which is not configured" in chunk.workflow_error
    assert (chunk.llm.endpoint, chunk.llm.model, chunk.llm.task) == ("writer", HAIKU, "summarize_chunk")


def test_memory_workflow_nodes_without_names_use_the_settings_endpoint_vector_ones_the_vector_endpoint(routed):
    engine, api = routed
    workflows = engine.home.root / "workflows"
    workflows.mkdir()
    (workflows / "notes.json").write_text(json.dumps([{"type": "Standard", "prompt": "Summarize: [TextChunk]"}]))
    (workflows / "vectors.json").write_text(json.dumps([{"type": "Standard", "prompt": "JSON for: {agent1Input}"}]))
    write_settings(engine.home.root, fileMemoryWorkflowName="notes", vectorMemoryWorkflowName="vectors",
                   endpointName="writer", vectorMemoryEndpointName="default")
    api.answer = lambda body: (json.dumps(MEMORY_JSON) if body["messages"][0]["content"].startswith("JSON for")
                               else f"Answered by {body['model']}.")
    ingest(engine, "d", messages(9))
    chunk = events(engine, "d", "ChunkSummarized")[0].event
    vector = events(engine, "d", "VectorMemoryStored")[0].event
    assert chunk.workflow.startswith("notes@") and chunk.workflow_error is None
    assert (chunk.llm.task, chunk.llm.endpoint, chunk.summary) == ("respond", "writer", f"Answered by {HAIKU}.")
    assert vector.workflow.startswith("vectors@") and (vector.llm.endpoint, vector.title) == ("default", "Launch plans")


def test_a_workflow_naming_an_unknown_endpoint_or_preset_is_refused_before_it_runs():
    from engram.providers.llm.routing import check_routes

    wf = parse([{"id": "answer", "type": "Standard", "endpointName": "writr"},
                {"type": "chatSummarySummarizer", "preset": "jsno"}], "flow.json")
    config = LlmConfig(provider="anthropic", endpoints={"default": Endpoint(), "writer": Endpoint()},
                       presets={"default": Preset(), "json": Preset()})
    with pytest.raises(ConfigError) as err:
        check_routes(config, wf.routes(), wf.source, env={"ANTHROPIC_API_KEY": "k"})
    assert [line.split(", which")[0] for line in str(err.value).splitlines()] == [
        "flow.json: node 1 ('answer') endpointName names endpoint 'writr'",
        "flow.json: node 2 ('chatSummarySummarizer') preset names preset 'jsno'",
    ]
    assert "did you mean 'writer'?" in str(err.value) and "did you mean 'json'?" in str(err.value)

"""An LLM that fails for a long stretch: memory creation waits it out and resumes, recording nothing twice."""

from __future__ import annotations

import pytest
from tests.memory.discussion.conftest import events, ingest, messages
from tests.memory.discussion.engine import LocalEngine
from tests.memory.discussion.test_llm_routing import answer as routed_answer
from tests.providers.llm.fake_messages_api import FAST_RETRIES, FakeMessagesApi

from engram.config.llm import Endpoint, LlmConfig, Preset


def answer(body: dict) -> str:
    """Structured memories as the routing tests answer them; chunk summaries in a sentence of their own."""
    text = routed_answer(body)
    return text if text.startswith("{") else "A summary written by the model."


@pytest.fixture
def llm_home(tmp_path, monkeypatch):
    from engram.config.service import load_service_config

    api = FakeMessagesApi().start()
    api.answer = answer
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    home = tmp_path / "home"
    home.mkdir()
    llm = LlmConfig(provider="anthropic",
                    endpoints={"default": Endpoint(model="claude-sonnet-5-5", **FAST_RETRIES, timeout_seconds=0.3,
                                                   base_url=api.url)},
                    presets={"default": Preset()})
    engine = LocalEngine(home, load_service_config(home).model_copy(update={"llm": llm}))
    yield engine, api
    engine.close()
    api.stop()


def _pump_until_idle(engine, rounds: int = 200) -> int:
    """What the policy actor's loop does (without its sleeps): pump, and again after a failure. Returns the
    number of rounds that ended with the Summarizer failing."""
    failed = 0
    for _ in range(rounds):
        engine.policies.run_until_caught_up()
        engine.shard.catch_up()
        if not engine.policies.errors:
            if engine.policies.run_until_caught_up() == 0:
                return failed
            continue
        failed += 1
    raise AssertionError(f"still failing after {rounds} rounds: {engine.policies.errors}")


def _assert_nothing_twice(engine) -> None:
    recs = engine.shard.read(0, limit=None)
    ids = [r.event_id for r in recs if r.event_id]
    assert len(ids) == len(set(ids))
    memories = [r.event.memory_id for r in recs if r.type in ("ChunkSummarized", "VectorMemoryStored")]
    assert len(memories) == len(set(memories))


def test_memory_creation_waits_out_a_long_outage_and_resumes_with_the_models_memories(llm_home):
    engine, api = llm_home
    for k in range(40):  # 5xx, overloaded, rate limits and timeouts: every attempt of ten whole rounds fails
        status = (500, 529, 429, 200)[k % 4]
        api.then(status, delay=0.5) if status == 200 else api.then(status)
    ingest(engine, "d", messages(14), settle=False)
    failed_rounds = _pump_until_idle(engine)
    assert failed_rounds >= 5  # it waited, round after round ...
    chunks, vectors = events(engine, "d", "ChunkSummarized"), events(engine, "d", "VectorMemoryStored")
    assert len(chunks) == 2 and len(vectors) == 2  # ... then made the memories, once
    assert all(r.event.llm.error is None and r.event.llm.fallback is None for r in chunks + vectors)
    assert {r.event.summary for r in chunks} == {"A summary written by the model."}
    _assert_nothing_twice(engine)
    assert engine.shard.verify_replay() == []


def test_answers_that_stay_malformed_get_the_labelled_fallback_and_memory_moves_on(llm_home):
    engine, api = llm_home
    api.answer = lambda body: "{not json" if "structured" in body["system"][0]["text"] else "A summary."
    ingest(engine, "d", messages(14), settle=False)
    assert _pump_until_idle(engine) == 0  # no stall on a bad answer: one repair, then the recorded fallback
    vectors = events(engine, "d", "VectorMemoryStored")
    assert len(vectors) == 2
    assert all("answer invalid after one repair" in r.event.llm.error for r in vectors)
    assert {r.event.llm.fallback for r in vectors} == {"offline-heuristic-v1"}
    _assert_nothing_twice(engine)

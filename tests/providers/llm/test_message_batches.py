"""Message Batches: a round trip through the fake API, mapping by custom_id, and resuming after a crash."""

from __future__ import annotations

import pytest

from engram.events.store import EventStore
from engram.providers.llm import inputs as i
from engram.providers.llm.endpoint_tasks import EndpointTasks
from engram.providers.llm.batches import BatchRunner, EventLogJournal
from engram.providers.llm.caller import CallFailed
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.types import ChatLine

TS = 1_683_554_160_000_000


def chunk(name: str) -> i.SummarizeChunk:
    line = ChatLine(role="user", name=name, content=f"I am {name} and I love painting.", seq=1, ts_us=TS)
    return i.SummarizeChunk(lines=(line,))


ITEMS = [("chunk-a", chunk("Ann")), ("chunk-b", chunk("Bob")), ("chunk-c", chunk("Cid"))]


def echo_speaker(body: dict) -> str:
    """The fake model's answer names the speaker of the chunk it was given."""
    text = body["messages"][0]["content"]
    return "Summary of " + text.split("I am ")[1].split(" and")[0]


@pytest.fixture
def tasks(llm_config, fake_api):
    fake_api.answer = echo_speaker
    return EndpointTasks(llm_config(), env={"ANTHROPIC_API_KEY": "k"})


def test_batch_results_come_back_to_their_own_requests_by_custom_id(tasks, fake_api, tmp_path):
    store = EventStore(tmp_path / "log.duckdb")
    fake_api.polls_before_end = 3
    runner = BatchRunner(tasks, EventLogJournal(store, "agent1"), poll_interval_seconds=0.001)
    results = runner.run(ITEMS)
    assert {cid: r.value for cid, r in results.items()} == {
        "chunk-a": "Summary of Ann",
        "chunk-b": "Summary of Bob",
        "chunk-c": "Summary of Cid",
    }  # the fake server returns results in reverse order
    llm = results["chunk-a"].llm
    assert llm.batch_id == "msgbatch_0001" and llm.error is None
    assert llm.cost_usd == pytest.approx((100 * 2.0 + 20 * 10.0) / 1e6 * 0.5)  # batch price: half
    assert fake_api.requests == []  # nothing went through the synchronous endpoint
    assert fake_api.batches["msgbatch_0001"]["polls"] >= 3  # polled until it ended (results() looks once more)
    store.close()


def test_a_batch_submitted_before_a_crash_is_collected_on_resume_without_resubmitting(tasks, llm_config, fake_api, tmp_path):
    path = tmp_path / "log.duckdb"
    store = EventStore(path)
    submissions = BatchRunner(tasks, EventLogJournal(store, "agent1")).submit(ITEMS)
    store.close()  # the process dies here: submitted, never collected

    store = EventStore(path)
    fresh = EndpointTasks(llm_config(), env={"ANTHROPIC_API_KEY": "k"})
    handled: list[dict] = []
    runner = BatchRunner(fresh, EventLogJournal(store, "agent1"), poll_interval_seconds=0.001)
    resumed = runner.resume(handled.append)
    assert list(resumed) == submissions
    assert resumed[submissions[0]]["chunk-b"].value == "Summary of Bob"
    assert handled == [resumed[submissions[0]]]
    assert fake_api.batch_creates == 1
    assert runner.resume() == {}  # collected: nothing left open
    types = [r.type for r in store.read(stream="agent:agent1")]
    assert types == ["LlmBatchPrepared", "LlmBatchSubmitted", "LlmBatchCollected"]
    store.close()


def test_a_batch_recorded_but_never_accepted_is_submitted_on_resume(llm_config, fake_api, tmp_path):
    fake_api.answer = echo_speaker
    store = EventStore(tmp_path / "log.duckdb")
    unreachable = llm_config(base_url="http://127.0.0.1:9", max_retries=0)
    with pytest.raises(CallFailed):
        BatchRunner(EndpointTasks(unreachable, env={"ANTHROPIC_API_KEY": "k"}), EventLogJournal(store, "a")).submit(ITEMS[:1])
    runner = BatchRunner(EndpointTasks(llm_config(), env={"ANTHROPIC_API_KEY": "k"}), EventLogJournal(store, "a"), poll_interval_seconds=0)
    (results,) = runner.resume().values()
    assert results["chunk-a"].value == "Summary of Ann"
    assert fake_api.batch_creates == 1
    store.close()


def test_an_errored_batch_request_is_a_recorded_failure_with_the_offline_value(tasks, fake_api, tmp_path):
    store = EventStore(tmp_path / "log.duckdb")
    fake_api.errored_custom_ids = {"chunk-b"}
    results = BatchRunner(tasks, EventLogJournal(store, "a"), poll_interval_seconds=0).run(ITEMS)
    failed = results["chunk-b"]
    assert failed.failed and failed.llm.error == "batch request errored: bad request"
    assert failed.llm.fallback == "offline-heuristic-v1"
    assert failed.value == OfflineTasks().run(chunk("Bob")).value
    assert not results["chunk-a"].failed
    store.close()


def test_custom_ids_the_api_would_refuse_are_rejected_before_anything_is_recorded(tasks, tmp_path):
    store = EventStore(tmp_path / "log.duckdb")
    with pytest.raises(ValueError, match="custom ids must match"):
        BatchRunner(tasks, EventLogJournal(store, "a")).submit([("has space", chunk("Ann"))])
    assert store.read() == []
    store.close()


def test_items_that_name_their_endpoint_go_in_that_endpoints_batch(fake_api, tmp_path):
    from engram.config.llm import Endpoint, LlmConfig

    fake_api.answer = echo_speaker
    config = LlmConfig(provider="anthropic", endpoints={
        "default": Endpoint(model="claude-sonnet-5-5", base_url=fake_api.url),
        "bulk": Endpoint(model="claude-haiku-4-5", base_url=fake_api.url),
    })
    store = EventStore(tmp_path / "log.duckdb")
    runner = BatchRunner(EndpointTasks(config, env={"ANTHROPIC_API_KEY": "k"}), EventLogJournal(store, "agent1"),
                         poll_interval_seconds=0.001)
    items = [ITEMS[0], ("chunk-b", i.SummarizeChunk(lines=chunk("Bob").lines, endpoint_name="bulk"))]
    results = runner.run(items)
    assert {cid: (r.llm.endpoint, r.llm.model) for cid, r in results.items()} == {
        "chunk-a": ("default", "claude-sonnet-5-5"), "chunk-b": ("bulk", "claude-haiku-4-5")}
    models = {b["requests"][0]["custom_id"]: b["requests"][0]["params"]["model"] for b in fake_api.batches.values()}
    assert models == {"chunk-a": "claude-sonnet-5-5", "chunk-b": "claude-haiku-4-5"}  # one batch per endpoint
    store.close()

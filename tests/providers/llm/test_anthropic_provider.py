"""The anthropic provider with the real SDK against the local fake Messages API."""

from __future__ import annotations

import json
import time

import pytest

from engram.config.agent import Personality
from engram.config.llm import Endpoint, LlmConfig, Preset, TaskRoute
from engram.events.background import ObservationNote
from engram.kernel.tokens import estimate_tokens
from engram.providers.llm.endpoint_tasks import EndpointTasks
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.types import ChatLine

MONDAY = 1_683_554_160_000_000  # 2023-05-08 13:56 UTC, a Monday
LINES = (
    ChatLine(role="user", name="Caroline", content="Hey Mel! Good to see you!", seq=1, ts_us=MONDAY, message_id="D1:1"),
    ChatLine(role="user", name="Melanie", content="I'm swamped with the kids and work.", seq=2, ts_us=MONDAY, message_id="D1:2"),
    ChatLine(
        role="user", name="Caroline", content="I went to an LGBTQ support group yesterday. I'll call the counselor next Friday.",
        seq=3, ts_us=MONDAY, message_id="D1:3",
    ),
)
NOTES_JSON = json.dumps(
    {
        "notes": [
            {"type": "factual", "text": "Caroline went to an LGBTQ support group on 2023-05-07.", "importance": 0.7,
             "entities": ["Caroline", "LGBTQ"], "refers_to": "2023-05-07", "lines": [3]},
            {"type": "commitment", "text": "Caroline will call the counselor next Friday.", "importance": 0.8,
             "entities": ["Caroline"], "refers_to": "2023-05-19", "lines": [3]},
        ]
    }
)


def user_text(body: dict) -> str:
    return body["messages"][0]["content"]


def test_summary_comes_from_the_model_with_tokens_cost_and_a_cached_system_prompt(claude, fake_api):
    fake_api.then(text="Caroline went to an LGBTQ support group.", usage={"input_tokens": 1000, "output_tokens": 50})
    result = claude.summarize_chunk(LINES)
    assert result.value == "Caroline went to an LGBTQ support group."
    llm = result.llm
    assert (llm.provider, llm.model, llm.task, llm.endpoint) == ("anthropic", "claude-sonnet-5-5", "summarize_chunk", "default")
    assert (llm.input_tokens, llm.output_tokens, llm.attempts, llm.error) == (1000, 50, 1, None)
    assert llm.cost_usd == pytest.approx((1000 * 2.0 + 50 * 10.0) / 1e6)  # claude-sonnet-5-5 list price
    assert len(llm.prompt_hash) == 16
    body = fake_api.requests[0]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 400  # WilmerAI's maxResponseSizeInTokens default
    assert "Caroline: I went to an LGBTQ support group yesterday." in user_text(body)


def test_cache_reads_are_counted_and_priced_at_the_cache_rate(claude, fake_api):
    fake_api.then(text="ok", usage={"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 2000})
    llm = claude.hyde("Where does Caroline live?").llm
    assert (llm.input_tokens, llm.cache_read_tokens) == (2010, 2000)
    assert llm.cost_usd == pytest.approx((10 * 2.0 + 5 * 10.0 + 2000 * 0.2) / 1e6)


def test_rate_limit_waits_as_long_as_retry_after_says(claude, fake_api):
    fake_api.then(429, headers={"retry-after": "0.3"}).then(text="after the wait")
    start = time.perf_counter()
    result = claude.hyde("What did Caroline do?")
    assert time.perf_counter() - start >= 0.3  # the configured backoff alone would be 1 ms
    assert (result.value, result.llm.attempts, result.failed) == ("after the wait", 2, False)


def test_retry_after_longer_than_allowed_is_a_recorded_failure_not_a_wait(llm_config, fake_api):
    tasks = EndpointTasks(llm_config(max_retry_after_seconds=1.0), env={"ANTHROPIC_API_KEY": "k"})
    fake_api.then(429, headers={"retry-after": "3600"})
    start = time.perf_counter()
    result = tasks.summarize_chunk(LINES)
    assert time.perf_counter() - start < 1.0
    assert result.failed and "retry-after 3600s exceeds" in result.llm.error
    assert result.llm.attempts == 1


def test_overloaded_529_is_retried_until_the_model_answers(claude, fake_api):
    fake_api.then(529).then(529).then(text="third time lucky")
    result = claude.hyde("q")
    assert (result.value, result.llm.attempts) == ("third time lucky", 3)
    assert len(fake_api.requests) == 3


def test_server_errors_past_the_retry_limit_give_the_labelled_offline_fallback(claude, fake_api):
    for _ in range(4):
        fake_api.then(500)
    result = claude.summarize_chunk(LINES)
    assert result.failed
    assert "HTTP 500" in result.llm.error and "gave up after 4 attempts" in result.llm.error
    assert result.llm.fallback == "offline-heuristic-v1"
    assert result.value == OfflineTasks().summarize_chunk(LINES).value
    assert len(fake_api.requests) == 4  # max_retries=3 → 4 attempts


def test_a_timeout_is_retried(llm_config, fake_api):
    tasks = EndpointTasks(llm_config(timeout_seconds=0.3), env={"ANTHROPIC_API_KEY": "k"})
    fake_api.then(delay=1.0, text="too late").then(text="in time")
    result = tasks.hyde("q")
    assert (result.value, result.llm.attempts, result.failed) == ("in time", 2, False)


def test_timeouts_past_the_retry_limit_are_a_recorded_failure(llm_config, fake_api):
    tasks = EndpointTasks(llm_config(timeout_seconds=0.2, max_retries=1), env={"ANTHROPIC_API_KEY": "k"})
    fake_api.then(delay=0.6).then(delay=0.6)
    result = tasks.hyde("When did Caroline go?")
    assert result.failed and "timeout after 0.2s" in result.llm.error
    assert result.value == "Caroline go"  # the offline heuristic's HyDE text


def test_a_bad_request_is_not_retried(claude, fake_api):
    fake_api.then(400)
    result = claude.hyde("q")
    assert result.failed and result.llm.error.startswith("HTTP 400 invalid_request_error")
    assert len(fake_api.requests) == 1


def test_an_answer_that_is_not_json_gets_one_repair_request(claude, fake_api):
    fake_api.then(text="Sure! Caroline went to a support group.").then(text=NOTES_JSON)
    result = claude.observe(LINES)
    assert not result.failed and result.llm.attempts == 2
    assert [n.type for n in result.value] == ["factual", "commitment"]
    repair = fake_api.requests[1]["messages"]
    assert [m["role"] for m in repair] == ["user", "assistant", "user"]
    assert repair[1]["content"] == "Sure! Caroline went to a support group."
    assert "no JSON object or array" in repair[2]["content"]


def test_an_answer_still_invalid_after_the_repair_is_a_recorded_failure(claude, fake_api):
    fake_api.then(text="not json").then(text='{"notes": [{"type": "gossip", "text": "x"}]}')
    result = claude.observe(LINES)
    assert result.failed and result.llm.error.startswith("answer invalid after one repair")
    assert "'gossip' is not one of" in result.llm.error
    assert result.value == OfflineTasks().observe(LINES).value
    assert result.llm.input_tokens == 200  # both requests are counted (100 each)


def test_a_fenced_json_answer_with_prose_around_it_is_accepted(claude, fake_api):
    fake_api.then(text=f"Here you go:\n```json\n{NOTES_JSON}\n```\nHope that helps!")
    result = claude.observe(LINES)
    assert not result.failed and len(result.value) == 2


def test_observation_notes_point_back_to_their_messages_and_dates(claude, fake_api):
    fake_api.then(text=NOTES_JSON)
    notes = claude.observe(LINES).value
    assert all(isinstance(n, ObservationNote) for n in notes)
    commitment = notes[1]
    assert (commitment.refers_to, commitment.source_seqs, commitment.observed_us) == ("2023-05-19", (3,), MONDAY)
    assert commitment.note_id.startswith("obs-") and commitment.confidence == 0.7


def test_personality_focus_is_written_into_the_observer_prompt(claude, fake_api):
    fake_api.then(text=NOTES_JSON).then(text=NOTES_JSON)
    claude.observe(LINES, personality=Personality(conscientiousness=0.9))
    claude.observe(LINES)
    focused, neutral = (user_text(b) for b in fake_api.requests)
    assert "commitments, deadlines and action items" in focused
    assert "Pay particular attention" not in neutral
    # the system prompt, the cached part, is the same for every personality
    assert fake_api.requests[0]["system"] == fake_api.requests[1]["system"]


def _notes() -> tuple[ObservationNote, ObservationNote]:
    old = ObservationNote(note_id="obs-old", type="preference", text="Caroline loves hiking.", importance=0.6,
                          observed_us=MONDAY, entities=("Caroline",), source_seqs=(1,))
    new = ObservationNote(note_id="obs-new", type="correction", text="Caroline no longer hikes.", importance=0.7,
                          observed_us=MONDAY + 1, entities=("Caroline",), source_seqs=(2,))
    return old, new


REFLECTION_JSON = json.dumps(
    {
        "traces": [{"content": "Caroline stopped hiking.", "trace_type": "semantic", "importance": 0.7,
                    "note_ids": ["obs-old", "obs-new", "obs-invented"]}],
        "contradictions": [{"older": "obs-old", "newer": "obs-new", "reason": "she stopped"}],
    }
)


def test_reflection_resolves_a_contradiction_the_way_the_personality_prefers(claude, fake_api):
    fake_api.then(text=REFLECTION_JSON).then(text=REFLECTION_JSON)
    honest = claude.reflect(_notes(), personality=Personality(honesty=0.9)).value
    agreeable = claude.reflect(_notes(), personality=Personality(agreeableness=0.9)).value
    assert (honest.contradictions[0].resolution, honest.superseded) == ("prefer_newer", ("obs-old",))
    assert honest.traces[0].source_note_ids == ("obs-new",)  # the superseded note does not feed the trace
    assert (agreeable.contradictions[0].resolution, agreeable.superseded) == ("keep_both", ())
    assert agreeable.consumed_note_ids == ("obs-old", "obs-new")


def test_facts_of_a_category_the_personality_does_not_store_are_dropped(claude, fake_api):
    answer = json.dumps({"facts": [
        {"category": "action_item", "content": "Caroline will call the counselor on 2023-05-19.", "importance": 0.8, "line": 3},
        {"category": "episodic", "content": "Caroline went to a support group on 2023-05-07.", "importance": 0.6, "line": 3},
        {"category": "episodic", "content": "Melanie said hi.", "importance": 0.1, "line": 1},
    ]})
    fake_api.then(text=answer).then(text=answer)
    neutral = claude.extract_facts(LINES).value
    conscientious = claude.extract_facts(LINES, personality=Personality(conscientiousness=0.9)).value
    assert [f.category for f in neutral] == ["episodic"]  # below-threshold fact dropped too
    assert [f.category for f in conscientious] == ["action_item", "episodic"]
    assert conscientious[0].source_seq == 3 and conscientious[0].message_id == "D1:3"


def test_a_compaction_longer_than_its_budget_is_cut_to_the_budget(claude, fake_api):
    long_summary = " ".join(f"Sentence number {k} about Caroline and the support group." for k in range(40))
    fake_api.then(text=json.dumps({"summary": long_summary, "preserved_entities": ["Caroline"], "dropped": ["D1:1", "bogus"]}))
    compaction = claude.compact(LINES, target_tokens=30).value
    assert 0 < estimate_tokens(compaction.summary) <= 30
    assert compaction.dropped == ("D1:1",)  # ids the model made up are ignored


def test_wilmer_placeholders_are_filled_in_a_discussion_prompt(claude, fake_api):
    fake_api.then(text="s").then(text="m")
    claude.summarize_chunk(
        LINES,
        recent_memories=["memory two"],
        all_memories=["memory one", "memory two"],
        chat_summary="the summary so far",
        system_prompt="Summarize like a journalist.",
        prompt="R=[Memory_file] | F=[Full_Memory_file] | S=[Chat_Summary] | S2=[CHAT_SUMMARY] | C=[TextChunk]",
    )
    claude.merge_summary("old summary", ["new one", "new two"], prompt="[CHAT_SUMMARY] + [LATEST_MEMORIES]")
    chunk, merge = fake_api.requests
    assert chunk["system"][0]["text"] == "Summarize like a journalist."
    assert user_text(chunk).startswith(
        "R=memory two | F=memory one\nmemory two | S=the summary so far | S2=the summary so far | C=Caroline: Hey Mel!"
    )
    assert user_text(merge) == "old summary + new one\nnew two"


def test_a_prompt_file_in_the_override_directory_replaces_the_default(fake_api, llm_config, tmp_path):
    (tmp_path / "hyde.prompt.txt").write_text("Imagine the memory answering: [Query]")
    config = llm_config().model_copy(update={"prompts_dir": str(tmp_path)})
    fake_api.then(text="x")
    EndpointTasks(config, env={"ANTHROPIC_API_KEY": "k"}).hyde("Where is Caroline?")
    assert user_text(fake_api.requests[0]) == "Imagine the memory answering: Where is Caroline?"


def test_task_routes_choose_endpoint_preset_and_response_size(fake_api):
    config = LlmConfig(
        provider="anthropic",
        endpoints={
            "default": Endpoint(base_url=fake_api.url),
            "cheap": Endpoint(model="claude-haiku-4-5", base_url=fake_api.url),
        },
        presets={"default": Preset(), "json": Preset(max_tokens=3000, effort="low")},
        tasks={"observe": TaskRoute(endpoint_name="cheap", preset="json", max_response_size_in_tokens=2048)},
    )
    fake_api.then(text=NOTES_JSON)
    result = EndpointTasks(config, env={"ANTHROPIC_API_KEY": "k"}).observe(LINES)
    body = fake_api.requests[0]
    assert (body["model"], body["max_tokens"], body["output_config"]["effort"]) == ("claude-haiku-4-5", 2048, "low")
    assert body["output_config"]["format"]["type"] == "json_schema"  # a JSON task asks for its schema's output format
    assert result.llm.structured == "output_format"
    assert "temperature" not in body  # not set in the preset: not sent
    assert (result.llm.endpoint, result.llm.model) == ("cheap", "claude-haiku-4-5")


def test_a_route_to_an_endpoint_without_its_key_is_a_recorded_failure(fake_api):
    config = LlmConfig(
        endpoints={"default": Endpoint(base_url=fake_api.url), "other": Endpoint(base_url=fake_api.url, api_key_env="OTHER_KEY")},
        tasks={"hyde": TaskRoute(endpoint_name="other")},
    )
    result = EndpointTasks(config, env={"ANTHROPIC_API_KEY": "k"}).hyde("Where is Caroline?")
    assert result.failed and "OTHER_KEY is not set" in result.llm.error
    assert fake_api.requests == []


def test_token_usage_and_cost_per_agent_are_plain_sql_over_the_recorded_events(claude, fake_api, tmp_path):
    from engram.events.discussion import ChunkSummarized
    from engram.events.store import EventStore
    from engram.providers.llm.pricing import COST_PER_AGENT_SQL

    store = EventStore(tmp_path / "log.duckdb")
    fake_api.then(text="one", usage={"input_tokens": 1000, "output_tokens": 100})
    fake_api.then(text="two", usage={"input_tokens": 3000, "output_tokens": 300})
    fake_api.then(text="three", usage={"input_tokens": 500, "output_tokens": 50})
    for agent, discussion in (("ann", "d1"), ("ann", "d2"), ("bob", "d3")):
        result = claude.summarize_chunk(LINES)
        event = ChunkSummarized(generation=0, first_seq=1, last_seq=3, message_ids=("D1:1",), token_count=40,
                                summary=result.value, llm=result.llm)
        store.append(discussion, [event], agent=agent, ts_us=MONDAY)
    cols, rows = store.query(COST_PER_AGENT_SQL)
    by_agent = {r[0]: dict(zip(cols, r)) for r in rows}
    assert (by_agent["ann"]["calls"], by_agent["ann"]["input_tokens"], by_agent["ann"]["output_tokens"]) == (2, 4000, 400)
    assert by_agent["ann"]["usd"] == pytest.approx((4000 * 2.0 + 400 * 10.0) / 1e6)
    assert by_agent["bob"]["input_tokens"] == 500
    # Reading the recorded summaries back (what replay does) asks the model nothing.
    asked = len(fake_api.requests)
    assert [r.event.summary for r in store.read(types=["ChunkSummarized"])] == ["one", "two", "three"]
    assert len(fake_api.requests) == asked == 3
    store.close()


CANNED = {
    "summarize_chunk": "Caroline went to a support group.",
    "merge_summary": "Caroline and Melanie talk about family and art.",
    "extract_memory": json.dumps({"title": "Support group", "summary": "Caroline went to a support group.",
                                  "entities": ["Caroline"], "key_phrases": ["support group"], "sentiment": "Positive",
                                  "topics": ["Community"]}),
    "observe": NOTES_JSON,
    "reflect": json.dumps({"traces": [{"content": "Caroline hikes.", "trace_type": "semantic", "note_ids": ["obs-old"]}],
                           "contradictions": []}),
    "extract_facts": json.dumps({"facts": [{"category": "goal", "content": "Caroline wants to be a counselor.",
                                            "importance": 0.7, "line": 3}]}),
    "summarize_schema": "Caroline goes to a support group every week.",
    "hyde": "Caroline went to the LGBTQ support group on 7 May 2023.",
    "compact": json.dumps({"summary": "Caroline went to a support group.", "preserved_entities": ["Caroline"], "dropped": []}),
}


def _every_input():
    from engram.providers.llm import inputs as i

    return [
        i.SummarizeChunk(lines=LINES),
        i.MergeSummary(previous_summary="old", new_memories=("new",)),
        i.ExtractMemory(lines=LINES),
        i.Observe(lines=LINES),
        i.Reflect(notes=_notes()),
        i.ExtractFacts(lines=LINES),
        i.SummarizeSchema(members=("a", "b")),
        i.Hyde(query="When did Caroline go?"),
        i.Compact(lines=LINES, target_tokens=50),
    ]


def test_every_memory_task_runs_on_the_anthropic_provider(claude, fake_api):
    inputs = _every_input()
    assert sorted(t.task for t in inputs) == sorted(CANNED)
    for task_input in inputs:
        fake_api.then(text=CANNED[task_input.task])
        result = claude.run(task_input)
        assert not result.failed, (task_input.task, result.llm.error)
        assert (result.llm.provider, result.llm.task) == ("anthropic", task_input.task)
    fake_api.then(text=CANNED["extract_memory"])
    memory = claude.run(inputs[2]).value
    assert (memory.title, memory.sentiment, memory.topics) == ("Support group", "positive", ("community",))


def test_an_empty_text_answer_is_asked_for_again_as_text(claude, fake_api):
    fake_api.then(text="   ").then(text="Caroline went to a support group.")
    result = claude.summarize_chunk(LINES)
    assert (result.value, result.llm.attempts) == ("Caroline went to a support group.", 2)
    repair = fake_api.requests[1]["messages"][2]["content"]
    assert "the answer is empty" in repair and "only the text asked for" in repair


def test_a_streamed_answer_arrives_in_pieces_and_is_retried_only_before_its_first_piece(claude, fake_api):
    answer = "Caroline moved to Lisbon in May 2023 with her sister."
    fake_api.then(529).then(text=answer)
    pieces: list[str] = []
    result = claude.respond(LINES, on_text=pieces.append)
    assert result.llm.error is None and result.value == answer and result.llm.attempts == 2  # the 529 was retried
    assert len(pieces) == len(answer.split()) and "".join(pieces) == answer
    assert fake_api.requests[-1]["stream"] is True
    # An error once the answer has started: no retry (it would repeat text already passed on); a recorded failure.
    fake_api.then(text=answer, fail_after=3).then(text="a retry that must not happen")
    pieces.clear()
    failed = claude.respond(LINES, on_text=pieces.append)
    assert failed.llm.error and "overloaded" in failed.llm.error and failed.llm.attempts == 1 and failed.transient
    assert "".join(pieces) == "Caroline moved to "

"""The respond task (Standard node, `engram chat`) on both providers, and per-call endpoint/preset routes."""

from __future__ import annotations

import pytest
from tests.providers.llm.fake_messages_api import FAST_RETRIES

from engram.config.discussion import DiscussionSettings
from engram.config.errors import ConfigError
from engram.config.llm import Endpoint, LlmConfig, Preset, TaskRoute
from engram.kernel.tokens import estimate_tokens
from engram.providers.llm.endpoint_tasks import EndpointTasks
from engram.providers.llm.offline import respond as offline_respond
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.routing import check_discussion_settings
from engram.providers.llm.types import ChatLine

T = 1_767_225_600_000_000
CONVERSATION = (
    ChatLine(role="user", content="Hi! I'm planning the Stardust launch.", seq=1, ts_us=T),
    ChatLine(role="assistant", content="Happy to help with Project Stardust.", seq=2, ts_us=T),
    ChatLine(role="user", content="Where does the Stardust launch happen?", seq=3, ts_us=T),
    ChatLine(role="user", content="And who leads it?", seq=4, ts_us=T),
)
QUESTION = (ChatLine(role="user", content="Where does the Stardust launch happen?", seq=1, ts_us=T),)
MEMORIES = (
    "Project Stardust launches from Kourou in French Guiana on March 12. Dr. Evelyn Reed leads the mission.",
    "Melanie painted a sunrise over the lake last summer.",
)


# ---------------------------------------------------------------- offline: a labelled quote, never a model


def test_offline_answer_quotes_the_memory_most_relevant_to_the_last_user_message_under_a_label():
    result = OfflineTasks().respond(QUESTION, context=MEMORIES)
    assert result.value == (
        "[offline heuristic, not a language model] The memories most relevant to the last message:\n"
        "- Project Stardust launches from Kourou in French Guiana on March 12."
    )
    assert (result.llm.provider, result.llm.model, result.llm.task, result.llm.endpoint) == (
        "offline", "offline-heuristic-v1", "respond", None)


def test_offline_answers_are_byte_for_byte_deterministic_and_stay_within_the_budget():
    long_memories = [f"Stardust launch note {n}: the launch window opens at dawn near Kourou." for n in range(40)]
    first = OfflineTasks().respond(QUESTION, context=long_memories, max_tokens=30)
    again = OfflineTasks().respond(QUESTION, context=long_memories, max_tokens=30)
    assert first.value == again.value and first.llm.prompt_hash == again.llm.prompt_hash
    assert estimate_tokens(first.value) <= 30
    assert first.value.startswith(offline_respond.TAG)


def test_offline_says_when_there_is_no_context_or_nothing_matches():
    tasks = OfflineTasks()
    assert tasks.respond(QUESTION).value == offline_respond.NO_CONTEXT
    assert tasks.respond(QUESTION, context=["Bananas are yellow."]).value == offline_respond.NO_MATCH


def test_offline_quotes_a_rendered_prompt_but_not_the_question_it_repeats():
    prompt = f"Memories: {MEMORIES[0]} {MEMORIES[1]}\nThe user asked: Where does the Stardust launch happen?"
    value = OfflineTasks().respond(QUESTION, prompt=prompt).value
    assert "- Memories: Project Stardust launches from Kourou" in value
    assert "The user asked" not in value


def test_respond_needs_a_conversation_or_a_prompt():
    with pytest.raises(ValueError, match="needs a conversation or a prompt"):
        OfflineTasks().respond([], prompt="  ")


# ---------------------------------------------------------------- anthropic: a real Messages API call


def test_the_conversation_goes_as_turns_with_the_memories_before_the_last_user_message(claude, fake_api):
    fake_api.then(text="It launches from Kourou; Dr. Evelyn Reed leads it.")
    result = claude.respond(CONVERSATION, context=MEMORIES)
    assert result.value == "It launches from Kourou; Dr. Evelyn Reed leads it."
    assert (result.llm.provider, result.llm.task, result.llm.endpoint, result.failed) == (
        "anthropic", "respond", "default", False)
    body = fake_api.requests[0]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"] == "Hi! I'm planning the Stardust launch."
    last = body["messages"][2]["content"]
    assert last.startswith("Memories from earlier conversations that may be relevant")
    assert MEMORIES[0] in last and MEMORIES[1] in last
    assert last.endswith("Where does the Stardust launch happen?\n\nAnd who leads it?")
    assert "long-term memory" in body["system"][0]["text"] and body["system"][0]["cache_control"]
    assert body["max_tokens"] == 400


def test_a_prompt_is_the_one_user_turn_and_places_the_context_where_it_says(claude, fake_api):
    fake_api.then(text="Kourou.")
    claude.respond(CONVERSATION, prompt="Known: [MemoryContext]\nQuestion: where?", system_prompt="Be brief.",
                   context=MEMORIES[:1])
    body = fake_api.requests[0]
    assert body["messages"] == [{"role": "user", "content": f"Known: {MEMORIES[0]}\nQuestion: where?"}]
    assert body["system"][0]["text"] == "Be brief."


def test_context_the_system_prompt_already_shows_is_not_repeated(claude, fake_api):
    fake_api.then(text="ok")
    claude.respond(QUESTION, system_prompt=f"Memories: {MEMORIES[0]}", context=MEMORIES[:1])
    assert fake_api.requests[0]["messages"] == [{"role": "user", "content": QUESTION[0].content}]


def test_a_failed_answer_is_recorded_and_the_labelled_offline_answer_stands_in(claude, fake_api):
    for _ in range(4):
        fake_api.then(500)
    result = claude.respond(QUESTION, context=MEMORIES)
    assert result.failed and "HTTP 500" in result.llm.error and result.llm.fallback == "offline-heuristic-v1"
    assert result.value.startswith(offline_respond.TAG)


# ---------------------------------------------------------------- per-call endpoint and preset


def two_endpoints(url: str, **config) -> LlmConfig:
    settings = {**FAST_RETRIES, "timeout_seconds": 5.0, "base_url": url}
    return LlmConfig(
        provider="anthropic",
        endpoints={"default": Endpoint(model="claude-sonnet-5-5", **settings),
                   "fast": Endpoint(model="claude-haiku-4-5", **settings)},
        presets={"default": Preset(max_tokens=512), "terse": Preset(temperature=0.0, max_tokens=64)},
        **config,
    )


def test_a_call_names_its_endpoint_and_preset_and_the_record_says_which_answered(fake_api):
    tasks = EndpointTasks(two_endpoints(fake_api.url), env={"ANTHROPIC_API_KEY": "k"})
    routed = tasks.respond(QUESTION, context=MEMORIES, endpoint_name="fast", preset="terse", max_tokens=50)
    plain = tasks.summarize_chunk(CONVERSATION)
    first, second = fake_api.requests
    assert (first["model"], first["temperature"], first["max_tokens"]) == ("claude-haiku-4-5", 0.0, 50)
    assert (routed.llm.endpoint, routed.llm.model) == ("fast", "claude-haiku-4-5")
    assert (second["model"], plain.llm.endpoint, plain.llm.model) == ("claude-sonnet-5-5", "default", "claude-sonnet-5-5")


def test_a_per_call_route_wins_over_the_task_route_and_its_response_size(fake_api):
    config = two_endpoints(fake_api.url, tasks={"summarize_chunk": TaskRoute(endpoint_name="fast",
                                                                            max_response_size_in_tokens=99)})
    tasks = EndpointTasks(config, env={"ANTHROPIC_API_KEY": "k"})
    by_task = tasks.summarize_chunk(CONVERSATION, max_tokens=300)
    by_call = tasks.summarize_chunk(CONVERSATION, max_tokens=300, endpoint_name="default")
    assert [(b["model"], b["max_tokens"]) for b in fake_api.requests] == [
        ("claude-haiku-4-5", 99), ("claude-sonnet-5-5", 300)]
    assert (by_task.llm.endpoint, by_call.llm.endpoint) == ("fast", "default")


def test_an_unknown_endpoint_or_preset_is_an_error_naming_the_closest_and_nothing_is_sent(fake_api):
    tasks = EndpointTasks(two_endpoints(fake_api.url), env={"ANTHROPIC_API_KEY": "k"})
    with pytest.raises(ConfigError, match=r"endpoint 'fsat', which is not configured \(did you mean 'fast'\?"):
        tasks.hyde("Where?", endpoint_name="fsat")
    with pytest.raises(ConfigError, match=r"preset 'trese'.*did you mean 'terse'\?"):
        tasks.extract_memory(QUESTION, preset="trese")
    assert fake_api.requests == []


def test_settings_naming_unknown_endpoints_are_refused_when_an_llm_answers(fake_api):
    config = two_endpoints(fake_api.url)
    settings = DiscussionSettings.model_validate({"endpointName": "fats", "vectorMemoryPreset": "tersse"})
    with pytest.raises(ConfigError) as err:
        check_discussion_settings(settings, config, "settings.json", env={"ANTHROPIC_API_KEY": "k"})
    assert str(err.value).splitlines() == [
        "settings.json: endpointName names endpoint 'fats', which is not configured (did you mean 'fast'? "
        "configured: default, fast; configure it under llm.endpoints in engram.json)",
        "settings.json: vectorMemoryPreset names preset 'tersse', which is not configured (did you mean 'terse'? "
        "configured: default, terse; configure it under llm.presets in engram.json)",
    ]
    # The offline heuristic calls no endpoint: the guide's own example names pass as written.
    guide = DiscussionSettings.model_validate({"endpointName": "default_endpoint", "vectorMemoryEndpointName": "gpt-4-turbo"})
    check_discussion_settings(guide, LlmConfig(), "settings.json", env={})

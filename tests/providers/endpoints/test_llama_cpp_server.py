"""The OpenAI-compatible types against a real llama.cpp server (llama-cpp-python 0.3.36 and the tiny test model).

Proves the wire formats (chat and text completions, streamed and not), the structured-output ways (its refusal of
`json_schema` read as a refusal and stepped down from once, `json_object` + schema, GBNF grammars) and the
context rules (engram's own sizing, the server's errors) against the real thing, not a stand-in.
"""

from __future__ import annotations

import json

import httpx
import pytest

from engram.config.llm import Endpoint, LlmConfig, Preset, TaskRoute
from engram.providers.endpoints.client import EndpointClient
from engram.providers.endpoints.gbnf import grammar
from engram.providers.endpoints.wire import CallFailed, Request, Sampling
from engram.providers.llm.answers.schemas import SCHEMAS, bounded
from engram.providers.llm import inputs as i
from engram.providers.llm.endpoint_tasks import EndpointTasks, PromptTooLarge
from engram.providers.llm.types import ChatLine

pytestmark = pytest.mark.llama

FAST = {"max_retries": 1, "retry_initial_delay_seconds": 0.01, "retry_max_delay_seconds": 0.01, "timeout_seconds": 60}


def endpoint(llama, api_type="openAIChatCompletion", **kw) -> Endpoint:
    # The tiny model's vocabulary is about one token per character, more with byte fallback and the template.
    return Endpoint(api_type=api_type, base_url=llama.url, model="tiny", chars_per_token=0.7, **{**FAST, **kw})


def tasks_for(llama, api_type="openAIChatCompletion", max_tokens=400, **kw) -> EndpointTasks:
    kw.setdefault("max_context_tokens", 2048)  # the server's --n_ctx: llama-cpp-python does not say it
    config = LlmConfig(endpoints={"default": endpoint(llama, api_type, **kw)},
                       presets={"default": Preset(temperature=0, max_tokens=max_tokens)})
    return EndpointTasks(config, env={})


def lines(*texts: str) -> list[ChatLine]:
    return [ChatLine(role="user" if n % 2 == 0 else "assistant", content=t, seq=n + 1, ts_us=n) for n, t in
            enumerate(texts)]


def served_500s(llama) -> int:
    return llama.output().count('"POST /v1/chat/completions HTTP/1.1" 500')


def test_a_chat_completion_is_the_servers_own_answer_with_its_usage(llama):
    client = EndpointClient("local", endpoint(llama), env={})
    request = Request(model="tiny", system="Be brief.", messages=(("user", "Hello"),), max_tokens=16, temperature=0)
    completion, attempts = client.create(request)
    direct = httpx.post(f"{llama.url}/v1/chat/completions", json={
        "model": "tiny", "max_tokens": 16, "temperature": 0,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]}).json()
    assert completion.text == direct["choices"][0]["message"]["content"] and completion.text
    assert (completion.input_tokens, completion.output_tokens) == (direct["usage"]["prompt_tokens"], 16)
    assert (completion.stop_reason, attempts, completion.usage_estimated) == ("length", 1, False)


def test_a_streamed_chat_reply_arrives_in_pieces_that_join_to_the_whole_answer(llama):
    client = EndpointClient("local", endpoint(llama), env={})
    request = Request(model="tiny", system="", messages=(("user", "Tell me a story"),), max_tokens=24, temperature=0)
    whole, _ = client.create(request)
    pieces: list[str] = []
    streamed, attempts = client.stream(request, pieces.append)
    assert len(pieces) > 3 and all(pieces)
    assert "".join(pieces) == streamed.text == whole.text
    # llama-cpp-python streams no usage: engram estimates it, and says so.
    assert streamed.usage_estimated and streamed.output_tokens > 0 and streamed.stop_reason == "length"


def test_a_text_completion_renders_the_chatml_template_the_model_was_trained_with(llama):
    client = EndpointClient("local", endpoint(llama, "openAIV1Completion"), env={})
    completion, _ = client.create(Request(model="tiny", system="", messages=(("user", "Hi"),), max_tokens=8,
                                          temperature=0))
    # "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n": 12 tokens with the special tokens parsed.
    assert completion.input_tokens == 12
    direct = httpx.post(f"{llama.url}/v1/completions", json={
        "prompt": "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "max_tokens": 8, "temperature": 0,
        "stop": ["<|im_end|>"]}).json()
    assert completion.text == direct["choices"][0]["text"]
    pieces: list[str] = []
    streamed, _ = client.stream(Request(model="tiny", system="", messages=(("user", "Hi"),), max_tokens=8,
                                        temperature=0), pieces.append)
    assert "".join(pieces) == streamed.text == completion.text


def test_a_front_ends_own_text_prompt_is_sent_as_it_is(llama):
    client = EndpointClient("local", endpoint(llama, "openAIV1Completion"), env={})
    completion, _ = client.create(Request(model="tiny", system="", messages=(), prompt="Once upon a time",
                                          max_tokens=8, temperature=0))
    direct = httpx.post(f"{llama.url}/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 8,
                                                             "temperature": 0}).json()
    assert completion.text == direct["choices"][0]["text"]


def test_json_schema_refused_by_the_server_steps_down_to_json_object_once_and_is_recorded(llama):
    tasks = tasks_for(llama)
    before = served_500s(llama)
    result = tasks.extract_memory(lines("My sister Ada moved to Lisbon in May.", "Nice!"))
    assert not result.failed, result.llm.error
    assert result.llm.structured == "json_object_schema" and not result.llm.repaired
    assert result.value.title.strip() and result.value.summary.strip()
    # The refusal (llama-cpp-python answers it with a 500) was read as a refusal: one 500, no retries of it.
    assert served_500s(llama) - before == 1
    again = tasks.extract_memory(lines("Ada's cat is called Miso."))
    assert again.llm.structured == "json_object_schema" and served_500s(llama) - before == 1


@pytest.mark.parametrize("task", ["extract_memory", "observe", "extract_facts", "reflect", "compact"])
def test_every_json_task_gets_valid_json_first_time_through_a_grammar(llama, task):
    tasks = tasks_for(llama, "openAIV1Completion", max_tokens=300)
    conversation = lines("I'm Ada. I moved to Lisbon in May and I'm allergic to peanuts.", "Noted, Ada.")
    if task == "extract_memory":
        result = tasks.extract_memory(conversation)
    elif task == "observe":
        result = tasks.observe(conversation)
    elif task == "extract_facts":
        result = tasks.extract_facts(conversation)
    elif task == "compact":
        result = tasks.compact(conversation, target_tokens=60)
    else:
        from engram.events.background import ObservationNote

        note = ObservationNote(note_id="n1", type="factual", text="Ada lives in Lisbon", importance=0.8,
                               observed_us=1, source_seqs=(1,))
        result = tasks.reflect([note])
    assert not result.failed, result.llm.error
    assert (result.llm.structured, result.llm.repaired, result.llm.provider) == ("grammar", False, "openAIV1Completion")
    assert result.llm.cost_usd == 0.0  # a local server


def test_every_grammar_engram_sends_parses_with_llama_cpps_own_parser(llama):
    llama_cpp = pytest.importorskip("llama_cpp")
    model = llama_cpp.Llama(str(llama.model), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(model.model)
    for task, schema in SCHEMAS.items():
        for budget in (200, 1000, 100_000):
            text = grammar(bounded(schema, budget))
            assert llama_cpp.llama_sampler_init_grammar(vocab, text.encode(), b"root"), (task, budget, text)
    assert not llama_cpp.llama_sampler_init_grammar(vocab, b"root ::= (", b"root")  # the check can fail


def test_a_prompt_that_cannot_fit_the_window_is_refused_before_sending_with_the_numbers(llama):
    tasks = tasks_for(llama, max_context_tokens=512)
    sent = llama.output().count("POST /v1/chat/completions")
    result = tasks.respond(lines("What did I say?"), system_prompt="Remember: " + "x" * 900, max_tokens=64)
    assert result.failed and not result.transient
    assert result.llm.error.startswith("endpoint 'default' (openAIChatCompletion tiny): the prompt needs ~")
    assert "with 64 for the answer; the window is 512 (maxContextTokens)" in result.llm.error
    assert llama.output().count("POST /v1/chat/completions") == sent  # nothing was sent


def test_the_proxys_reply_drops_memory_passages_to_fit_not_the_users_message(llama):
    tasks = tasks_for(llama, max_context_tokens=1200)
    passages = [f"Passage {n}: Ada lives in Lisbon " + "and more " * 20 for n in range(6)]
    result = tasks.respond(lines("Where does Ada live?"), context=passages, max_tokens=64)
    assert not result.failed, result.llm.error
    assert 0 < result.llm.input_tokens <= 1200 - 64  # counted by the server
    sent = tasks.prepare(i.Respond(lines=tuple(lines("Where does Ada live?")), context=tuple(passages), max_tokens=64))
    last = sent.request.messages[-1][1]
    assert "Where does Ada live?" in last and "Passage 0" in last and "Passage 5" not in last  # lowest-ranked first


def test_a_chunk_bigger_than_the_window_is_summarised_within_it(llama):
    tasks = tasks_for(llama, max_context_tokens=1200, max_tokens=48)
    chunk = lines(*[f"Message {n}: we talked about the Lisbon trip and the peanut allergy again." for n in range(24)])
    one = tasks.prepare(i.SummarizeChunk(lines=tuple(chunk[:1]))).request
    assert EndpointTasks.needed_tokens(tasks.config.endpoints["default"], one) < 1200  # one message fits
    with pytest.raises(PromptTooLarge):  # the whole chunk does not
        tasks.prepare(i.SummarizeChunk(lines=tuple(chunk)))
    calls, refused = llama.output().count("POST /v1/chat/completions"), llama.output().count('HTTP/1.1" 400')
    result = tasks.summarize_chunk(chunk)
    assert not result.failed, result.llm.error
    assert result.value.strip() and llama.output().count("POST /v1/chat/completions") - calls >= 2  # in parts
    assert llama.output().count('HTTP/1.1" 400') == refused  # nothing refused by the server


def test_the_servers_own_context_error_is_read_and_not_retried(llama):
    client = EndpointClient("local", endpoint(llama, max_retries=3), env={})
    request = Request(model="tiny", system="", messages=(("user", "y " * 2500),), max_tokens=8)
    with pytest.raises(CallFailed) as failed:
        client.create(request)
    assert failed.value.kind == "context" and failed.value.attempts == 1 and not failed.value.transient
    assert "maximum context length is 2048 tokens" in failed.value.error and "maxContextTokens" in failed.value.error


def test_a_streamed_request_the_server_ends_without_an_answer_is_a_failure_not_an_empty_reply(llama):
    # Over its window, llama-cpp-python answers a stream with 200 and an empty body.
    client = EndpointClient("local", endpoint(llama, max_retries=0), env={})
    pieces: list[str] = []
    with pytest.raises(CallFailed) as failed:
        client.stream(Request(model="tiny", system="", messages=(("user", "y " * 2500),), max_tokens=8), pieces.append)
    assert pieces == [] and failed.value.transient and "ended without a finish reason" in failed.value.error


def test_a_bad_key_variable_never_reaches_an_error_message(llama):
    client = EndpointClient("local", endpoint(llama, api_key_env="MY_SECRET_VAR"), env={"MY_SECRET_VAR": "sk-zzz-123"})
    completion, _ = client.create(Request(model="tiny", system="", messages=(("user", "Hi"),), max_tokens=4))
    assert completion.text is not None
    with pytest.raises(CallFailed) as failed:
        EndpointClient("local", endpoint(llama, api_key_env="UNSET_VAR"), env={})
    assert "UNSET_VAR is not set" in failed.value.error
    assert "sk-zzz" not in llama.output()
    assert json.dumps(client.endpoint.to_json_dict()).count("sk-zzz") == 0


def test_the_proxys_reply_streams_from_the_routed_endpoint_with_the_front_ends_samplers(llama):
    tasks = tasks_for(llama)
    pieces: list[str] = []
    result = tasks.respond(lines("Tell me about Lisbon"), on_text=pieces.append,
                           sampling=Sampling(max_tokens=12, temperature=0))
    assert not result.failed and len(pieces) > 2 and "".join(pieces) == result.value
    assert (result.llm.provider, result.llm.endpoint, result.llm.usage_estimated) == (
        "openAIChatCompletion", "default", True)
    assert result.llm.output_tokens > 0 and result.llm.input_tokens > 0


def test_a_text_prompt_of_the_front_end_goes_to_a_completion_endpoint_as_it_is(llama):
    tasks = tasks_for(llama, "openAIV1Completion")
    result = tasks.respond([], completion_prompt="Once upon a time", sampling=Sampling(max_tokens=8, temperature=0))
    direct = httpx.post(f"{llama.url}/v1/completions", json={"prompt": "Once upon a time", "max_tokens": 8,
                                                             "temperature": 0}).json()
    assert not result.failed and result.value == direct["choices"][0]["text"].strip()

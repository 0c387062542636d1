"""Ollama's native API, KoboldCpp and LM Studio, against STAND-IN servers (none can run here; see `standins.py`).

The stand-ins are strict about the documented wire formats and count what the real servers would cut silently;
the tests assert engram sends what they take, reads what they answer, and never relies on a silent cut.
"""

from __future__ import annotations

import json
import threading

import pytest

from engram.config.llm import Endpoint, LlmConfig, Preset
from engram.providers.endpoints.client import EndpointClient
from engram.providers.endpoints.wire import CallFailed, Request
from engram.providers.llm.endpoint_tasks import EndpointTasks
from engram.providers.llm.types import ChatLine
from tests.providers.endpoints.standins import KoboldCppStandIn, OllamaStandIn

FAST = {"max_retries": 2, "retry_initial_delay_seconds": 0.01, "retry_max_delay_seconds": 0.01, "timeout_seconds": 10}
LINES = [ChatLine(role="user", content="I'm Ada; I moved to Lisbon in May.", seq=1, ts_us=1),
         ChatLine(role="assistant", content="Welcome to Lisbon, Ada!", seq=2, ts_us=2)]
MEMORY_JSON = ('{"title": "Ada moved to Lisbon", "summary": "Ada moved to Lisbon in May.", "entities": ["Ada", '
               '"Lisbon"], "key_phrases": ["moved"], "sentiment": "positive", "topics": ["moving"]}')


@pytest.fixture
def ollama():
    server = OllamaStandIn().start()
    yield server
    server.stop()


@pytest.fixture
def kobold():
    server = KoboldCppStandIn(context=4096).start()
    yield server
    server.stop()


def tasks_with(endpoint: Endpoint, **preset) -> EndpointTasks:
    return EndpointTasks(LlmConfig(endpoints={"default": endpoint}, presets={"default": Preset(**preset)}), env={})


def test_ollama_stand_in_chat_gets_the_schema_as_format_and_the_window_as_num_ctx(ollama):
    ollama.modelfile_num_ctx["llama3.1:8b"] = 8192
    tasks = tasks_with(Endpoint(api_type="ollamaApiChat", base_url=ollama.url, model="llama3.1:8b", keep_alive="30m",
                                **FAST), temperature=0.3)
    ollama.then(MEMORY_JSON)
    result = tasks.extract_memory(LINES)
    assert not result.failed, result.llm.error
    assert (result.value.title, result.llm.structured, result.llm.provider) == (
        "Ada moved to Lisbon", "ollama_format", "ollamaApiChat")
    assert result.llm.cost_usd == 0.0 and result.llm.input_tokens > 0 and not result.llm.usage_estimated
    body = ollama.posts("/api/chat")[0]
    assert body["stream"] is False and body["keep_alive"] == "30m"
    assert body["format"]["type"] == "object" and "title" in body["format"]["properties"]
    assert body["options"]["num_ctx"] == 8192  # read from /api/show (the Modelfile) and always sent
    assert body["options"]["temperature"] == 0.3 and body["options"]["num_predict"] > 0
    assert body["messages"][0]["role"] == "system"
    assert ollama.ignored_options == [] and ollama.silently_truncated == 0
    assert '"properties"' not in json.dumps(body["messages"])  # the schema is never pasted into the prompt


def test_ollama_stand_in_window_is_the_trained_one_capped_at_ollamas_default_when_the_modelfile_says_none(ollama):
    client = EndpointClient("local", Endpoint(api_type="ollamaApiChat", base_url=ollama.url, model="llama3.1:8b",
                                              **FAST), env={})
    assert client.window() == (4096, "/api/show context_length, capped at Ollama's default 4096")
    configured = EndpointClient("local", Endpoint(api_type="ollamaApiChat", base_url=ollama.url, model="llama3.1:8b",
                                                  max_context_tokens=2048, **FAST), env={})
    assert configured.window() == (2048, "maxContextTokens")


def test_ollama_stand_in_streams_ndjson_deltas_to_the_caller(ollama):
    ollama.then("Lisbon is where Ada lives now.")
    tasks = tasks_with(Endpoint(api_type="ollamaApiChat", base_url=ollama.url, model="llama3.1:8b", **FAST))
    pieces: list[str] = []
    result = tasks.respond(LINES, on_text=pieces.append)
    assert pieces == ["Lisbon", " is", " where", " Ada", " lives", " now."]
    assert result.value == "Lisbon is where Ada lives now." and result.llm.output_tokens > 0
    assert ollama.posts("/api/chat")[-1]["stream"] is True


def test_ollama_stand_in_generate_sends_the_templated_prompt_raw(ollama):
    ollama.then("A summary.")
    tasks = tasks_with(Endpoint(api_type="ollamaApiGenerate", base_url=ollama.url, model="llama3.1:8b",
                                prompt_template="llama3", **FAST))
    result = tasks.summarize_chunk(LINES)
    assert result.value == "A summary." and not result.failed
    body = ollama.posts("/api/generate")[0]
    assert body["raw"] is True and body["prompt"].endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert "<|eot_id|>" in body["options"]["stop"]


def test_ollama_stand_in_missing_model_is_one_line_saying_to_pull_it(ollama):
    client = EndpointClient("local", Endpoint(api_type="ollamaApiChat", base_url=ollama.url, model="qwen3:4b",
                                              max_context_tokens=4096, **FAST), env={})
    with pytest.raises(CallFailed) as failed:
        client.create(Request(model="qwen3:4b", system="", messages=(("user", "hi"),), max_tokens=8))
    assert failed.value.kind == "model_missing" and failed.value.attempts == 1
    assert "run `ollama pull qwen3:4b`" in failed.value.error and "\n" not in failed.value.error


def test_ollama_stand_in_old_not_found_text_is_read_the_same_way():
    server = OllamaStandIn(old_not_found_text=True).start()
    try:
        client = EndpointClient("local", Endpoint(api_type="ollamaApiChat", base_url=server.url, model="mistral",
                                                  max_context_tokens=4096, **FAST), env={})
        with pytest.raises(CallFailed, match="ollama pull mistral"):
            client.create(Request(model="mistral", system="", messages=(("user", "hi"),), max_tokens=8))
    finally:
        server.stop()


def test_ollama_stand_in_embeddings_come_back_per_text(ollama):
    client = EndpointClient("embed", Endpoint(api_type="ollamaEmbeddings", base_url=ollama.url, model="llama3.1:8b",
                                              **FAST), env={})
    vectors = client.embed(["hello", "hello world"])
    assert [v[0] for v in vectors] == [5.0, 11.0]
    assert ollama.posts("/api/embed")[0] == {"input": ["hello", "hello world"], "truncate": False,
                                             "model": "llama3.1:8b"}


def test_koboldcpp_stand_in_gets_a_grammar_and_its_window(kobold):
    tasks = tasks_with(Endpoint(api_type="koboldCppGenerate", base_url=kobold.url, **FAST))
    kobold.then(MEMORY_JSON)
    result = tasks.extract_memory(LINES)
    assert not result.failed, result.llm.error
    assert (result.llm.structured, result.llm.provider, result.llm.cost_usd) == ("grammar", "koboldCppGenerate", 0.0)
    body = kobold.posts("/api/v1/generate")[0]
    assert body["grammar"].startswith("root ::=") and body["grammar_retain_state"] is False
    assert body["max_context_length"] == 4096  # /api/extra/true_max_context_length
    assert body["prompt"].startswith("<|im_start|>system\n") and body["stop_sequence"] == ["<|im_end|>"]
    assert kobold.silently_truncated == 0


def test_koboldcpp_stand_in_grammars_parse_with_llama_cpps_parser(tmp_path):
    llama_cpp = pytest.importorskip("llama_cpp")
    from tests.providers.endpoints import tiny_gguf

    path = tmp_path / "tiny.gguf"
    tiny_gguf.write(path)
    model = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(model.model)
    server = KoboldCppStandIn(grammar_check=lambda g: bool(llama_cpp.llama_sampler_init_grammar(
        vocab, g.encode(), b"root"))).start()
    try:
        tasks = tasks_with(Endpoint(api_type="koboldCppGenerate", base_url=server.url, **FAST))
        server.then('{"notes": []}', '{"facts": []}')
        assert not tasks.observe(LINES).failed and not tasks.extract_facts(LINES).failed
        assert len(server.posts("/api/v1/generate")) == 2
    finally:
        server.stop()


def test_koboldcpp_stand_in_streams_its_sse_tokens(kobold):
    kobold.then("Ada lives in Lisbon.")
    tasks = tasks_with(Endpoint(api_type="koboldCppGenerate", base_url=kobold.url, **FAST))
    pieces: list[str] = []
    result = tasks.respond(LINES, on_text=pieces.append)
    assert "".join(pieces) == result.value == "Ada lives in Lisbon." and len(pieces) == 4
    assert result.llm.usage_estimated  # KoboldCpp streams no usage
    assert kobold.posts("/api/extra/generate/stream")


def test_koboldcpp_stand_in_is_never_flooded_eight_tasks_queue_on_one_slot():
    server = KoboldCppStandIn(multiuser=0, delay=0.05).start()  # a second concurrent request would get 503
    try:
        tasks = tasks_with(Endpoint(api_type="koboldCppGenerate", base_url=server.url, max_concurrent_requests=1,
                                    **{**FAST, "max_retries": 0}))
        server.answer = lambda body: "A summary."
        results = []
        threads = [threading.Thread(target=lambda: results.append(tasks.summarize_chunk(LINES))) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 8 and all(not r.failed for r in results), [r.llm.error for r in results]
        assert (server.busy_refusals, server.overlaps) == (0, 0)
    finally:
        server.stop()


def test_koboldcpp_stand_in_wrong_password_is_one_clear_line():
    server = KoboldCppStandIn(password="pw").start()
    try:
        client = EndpointClient("kobold", Endpoint(api_type="koboldCppGenerate", base_url=server.url,
                                                   api_key_env="KOBOLD_PW", max_context_tokens=2048, **FAST),
                                env={"KOBOLD_PW": "wrong-secret"})
        with pytest.raises(CallFailed) as failed:
            client.create(Request(model="", system="", messages=(("user", "hi"),), max_tokens=8))
        assert failed.value.kind == "auth" and "KOBOLD_PW" in failed.value.error
        assert "wrong-secret" not in failed.value.error
    finally:
        server.stop()


def _summaries_in_another_process(url: str, slots: str, count: int, out) -> None:
    from pathlib import Path

    tasks = EndpointTasks(LlmConfig(endpoints={"default": Endpoint(
        api_type="koboldCppGenerate", base_url=url, max_concurrent_requests=1, **{**FAST, "max_retries": 0})}),
        env={}, slots_dir=Path(slots))
    out.put(sum(1 for _ in range(count) if not tasks.summarize_chunk(LINES).failed))


def test_koboldcpp_stand_in_one_slot_holds_across_the_processes_of_a_home(tmp_path):
    import multiprocessing

    server = KoboldCppStandIn(multiuser=0, delay=0.03).start()
    server.answer = lambda body: "A summary."
    try:
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        procs = [ctx.Process(target=_summaries_in_another_process, args=(server.url, str(tmp_path / "run" / "llm"), 4,
                                                                          out)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=60)
        assert sorted(out.get(timeout=5) for _ in procs) == [4, 4, 4]
        assert (server.busy_refusals, server.overlaps) == (0, 0)
        assert (tmp_path / "run" / "llm" / "default.0.lock").exists()
    finally:
        server.stop()


def test_lm_studio_stand_in_gets_json_schema_first_and_keeps_it():
    from tests.providers.endpoints.standins import LMStudioStandIn

    server = LMStudioStandIn().start()
    try:
        tasks = tasks_with(Endpoint(api_type="openAIChatCompletion", base_url=server.url + "/v1",
                                    model="qwen2.5-7b-instruct", max_context_tokens=8192, **FAST))
        server.then(MEMORY_JSON, MEMORY_JSON)
        first, second = tasks.extract_memory(LINES), tasks.extract_memory(LINES)
        assert not first.failed and (first.llm.structured, second.llm.structured) == ("json_schema", "json_schema")
        fmt = server.posts("/v1/chat/completions")[0]["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "extract_memory"
        assert fmt["json_schema"]["strict"] is False and fmt["json_schema"]["schema"]["properties"]["title"]
        server.then("Ada lives in Lisbon.")
        pieces: list[str] = []
        reply = tasks.respond(LINES, on_text=pieces.append)
        assert "".join(pieces) == reply.value == "Ada lives in Lisbon."
        assert (reply.llm.input_tokens, reply.llm.usage_estimated) == (42, False)  # the stream's usage chunk
    finally:
        server.stop()


def test_lm_studio_stand_in_refuses_json_object_and_engram_never_sends_it_first():
    from tests.providers.endpoints.standins import LMStudioStandIn

    server = LMStudioStandIn().start()
    try:
        client = EndpointClient("lms", Endpoint(api_type="openAIChatCompletion", base_url=server.url, model="m",
                                                structured_output="jsonObjectSchema", max_context_tokens=8192,
                                                **FAST), env={})
        from engram.providers.endpoints.wire import Structured

        with pytest.raises(CallFailed) as failed:
            client.create(Request(model="m", system="", messages=(("user", "hi"),), max_tokens=8,
                                  structured=Structured("x", {"type": "object", "properties": {}})))
        assert failed.value.kind == "refused_structured" and failed.value.attempts == 1  # configured: no ladder
    finally:
        server.stop()

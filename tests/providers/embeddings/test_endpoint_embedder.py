"""The embedder endpoint (`"embedder": {"name": "endpoint", "endpoint": ...}`) against a real llama.cpp server.

llama-cpp-python's `python -m llama_cpp.server --embedding True` with the tiny model the test writes (`--plain`: 64
dimensions, random weights) serves `POST /v1/embeddings` as llama.cpp does: unnormalised vectors.
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from pydantic import ValidationError

from engram.config.service import ServiceConfig
from engram.providers.embeddings import CachedEmbedder, EmbeddingCache, make_embedder
from engram.providers.embeddings.endpoint import EmbedderUnavailable, EndpointEmbedder
from tests.providers.endpoints.llama_server import LlamaServer, free_port


TEXTS = ["Ada keeps bees on the roof.", "The blue door sticks in winter.", "Ada's bees make clover honey."]


@pytest.fixture(scope="module")
def embed_server(tmp_path_factory):
    """llama.cpp's server with embeddings on (the tiny --plain model), alias "tiny-embed"."""
    server = LlamaServer(tmp_path_factory.mktemp("llama-embed"), embedding=True, alias="tiny-embed").start()
    yield server
    server.stop()


def config_for(url: str, api_type: str = "openAIEmbeddings", **embedder) -> ServiceConfig:
    return ServiceConfig.model_validate({
        "llm": {"endpoints": {"default": {"apiType": "offline"},
                              "embed": {"apiType": api_type, "baseUrl": url, "model": "tiny-embed"}}},
        "embedder": {"name": "endpoint", "endpoint": "embed", **embedder},
    })


def test_llama_cpp_vectors_come_back_unit_length_with_the_servers_dimension(embed_server):
    raw = httpx.post(f"{embed_server.url}/v1/embeddings", json={"model": "tiny-embed", "input": TEXTS}).json()
    raw_rows = np.array([row["embedding"] for row in raw["data"]], dtype=np.float32)
    assert not np.allclose(np.linalg.norm(raw_rows, axis=1), 1.0)  # llama.cpp does not normalise

    embedder = make_embedder(config_for(embed_server.url).embedder)
    vectors = embedder.embed(TEXTS)

    assert isinstance(embedder, EndpointEmbedder)
    assert embedder.dim == 64 and vectors.shape == (3, 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors, raw_rows / np.linalg.norm(raw_rows, axis=1, keepdims=True), atol=1e-5)
    assert embedder.name == f"openAIEmbeddings:tiny-embed@{embed_server.url}/64d"


def test_batches_of_any_size_give_the_same_vectors_and_empty_texts_give_zero_rows(embed_server):
    texts = TEXTS + ["", "hello world", "hello world!"]
    one_call = make_embedder(config_for(embed_server.url).embedder).embed(texts)
    by_two = make_embedder(config_for(embed_server.url, batchSize=2).embedder).embed(texts)

    assert np.allclose(one_call, by_two, atol=1e-5)
    assert not one_call[3].any()  # the empty text: a zero row, never an empty request (llama.cpp: 500)
    assert float(one_call[4] @ one_call[5]) > 0.8 > float(one_call[0] @ one_call[4])


def test_the_cache_keys_vectors_by_the_endpoints_identity(embed_server, tmp_path):
    cache = EmbeddingCache(tmp_path / "cache.duckdb")
    cached = CachedEmbedder(make_embedder(config_for(embed_server.url).embedder), cache)
    first = cached.embed(TEXTS)
    again = cached.embed(TEXTS)

    assert np.array_equal(first, again)
    assert cached.stats.texts_computed == 3 and cached.stats.cache_hits == 3
    assert cache.count(f"openAIEmbeddings:tiny-embed@{embed_server.url}/64d") == 3
    assert cache.count("all-MiniLM-L6-v2-onnx-int8") == 0


def test_an_unreachable_embedder_endpoint_is_one_line_naming_it_and_what_to_fix():
    embedder = make_embedder(config_for(f"http://127.0.0.1:{free_port()}").embedder)
    with pytest.raises(EmbedderUnavailable) as caught:
        embedder.embed(["hello"])
    message = str(caught.value)
    assert "\n" not in message
    assert "'embed'" in message and "is the server running? check llm.endpoints.embed.baseUrl" in message


def test_a_chat_server_without_embeddings_says_to_turn_them_on(tmp_path):
    server = LlamaServer(tmp_path, embedding=False, alias="tiny").start()
    try:
        embedder = make_embedder(config_for(server.url).embedder)
        with pytest.raises(EmbedderUnavailable) as caught:
            embedder.embed(["hello"])
    finally:
        server.stop()
    assert "'embed'" in str(caught.value) and "start the server with embeddings on" in str(caught.value)


def test_a_wrong_path_says_to_check_the_base_url_and_api_type(embed_server):
    # An Ollama-type endpoint pointed at llama.cpp's server: /api/embed is not there.
    embedder = make_embedder(config_for(embed_server.url, api_type="ollamaEmbeddings").embedder)
    with pytest.raises(EmbedderUnavailable) as caught:
        embedder.embed(["hello"])
    assert "'embed'" in str(caught.value) and "llm.endpoints.embed" in str(caught.value)


def test_the_embedder_must_name_a_configured_embedding_endpoint():
    with pytest.raises(ValidationError, match="embedder endpoint 'embd' is not configured .*did you mean 'embed'"):
        ServiceConfig.model_validate({
            "llm": {"endpoints": {"default": {"apiType": "offline"}, "embed": {"apiType": "openAIEmbeddings",
                                                                               "baseUrl": "http://127.0.0.1:1"}}},
            "embedder": {"name": "endpoint", "endpoint": "embd"}})
    with pytest.raises(ValidationError, match="apiType 'openAIChatCompletion', which does not serve embeddings"):
        ServiceConfig.model_validate({
            "llm": {"endpoints": {"default": {"apiType": "openAIChatCompletion", "baseUrl": "http://127.0.0.1:1"}}},
            "embedder": {"name": "endpoint", "endpoint": "default"}})
    with pytest.raises(ValidationError, match='needs "endpoint"'):
        ServiceConfig.model_validate({"embedder": {"name": "endpoint"}})
    with pytest.raises(ValidationError, match='read only with "name": "endpoint"'):
        ServiceConfig.model_validate({"embedder": {"name": "minilm", "endpoint": "embed"}})


def test_the_embedders_settings_travel_to_another_process_with_the_endpoint(embed_server):
    # The home's embedder actor gets the embedder's settings alone, as JSON.
    from engram.config.llm import EmbedderConfig

    shipped = EmbedderConfig.model_validate(config_for(embed_server.url).embedder.model_dump(mode="json"))
    assert make_embedder(shipped).embed(["hello"]).shape == (1, 64)


# ---------------------------------------------------------------------------------------------- Ollama's /api/embed
# No Ollama server can be installed here: OllamaStandIn (tests/providers/endpoints/standins.py) is a labelled
# stand-in, strict about Ollama's wire format (a model it does not have is a 404, an empty input a 400).


@pytest.fixture
def ollama_standin():
    from tests.providers.endpoints.standins import OllamaStandIn

    standin = OllamaStandIn(models={"nomic-embed-text:latest": 2048}).start()
    yield standin
    standin.stop()


def ollama_config(url: str, model: str = "nomic-embed-text", **embedder) -> ServiceConfig:
    return ServiceConfig.model_validate({
        "llm": {"endpoints": {"default": {"apiType": "offline"},
                              "embed": {"apiType": "ollamaEmbeddings", "baseUrl": url, "model": model}}},
        "embedder": {"name": "endpoint", "endpoint": "embed", **embedder},
    })


def test_ollama_stand_in_embeds_in_batches_sent_as_ollama_expects(ollama_standin):
    embedder = make_embedder(ollama_config(ollama_standin.url, batchSize=2).embedder)
    vectors = embedder.embed(TEXTS + [""])

    assert embedder.name == f"ollamaEmbeddings:nomic-embed-text@{ollama_standin.url}/3d"
    assert vectors.shape == (4, 3) and np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0, atol=1e-6)
    assert not vectors[3].any()
    bodies = ollama_standin.posts("/api/embed")
    # One probe for the dimension, then the three texts in batches of two; never an empty input; never cut.
    assert [b["input"] for b in bodies] == [["engram: how many dimensions?"], TEXTS[:2], TEXTS[2:]]
    assert all(b["model"] == "nomic-embed-text" and b["truncate"] is False for b in bodies)


def test_ollama_stand_in_a_model_not_pulled_says_to_pull_it(ollama_standin):
    embedder = make_embedder(ollama_config(ollama_standin.url, model="mxbai-embed-large").embedder)
    with pytest.raises(EmbedderUnavailable) as caught:
        embedder.embed(["hello"])
    message = str(caught.value)
    assert "\n" not in message and "'embed'" in message and "ollama pull mxbai-embed-large" in message

"""The default embedder is the real all-MiniLM-L6-v2; the hashing fallback says what it is."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from engram.config.llm import EmbedderConfig
from engram.providers.embeddings import make_embedder
from engram.providers.embeddings.hashing import HashingEmbedder
from engram.providers.embeddings.minilm import MiniLmEmbedder


@pytest.fixture(scope="module")
def minilm():
    return make_embedder()


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_the_default_embedder_is_minilm_with_384_dimensions(minilm):
    assert isinstance(minilm, MiniLmEmbedder)
    assert (minilm.name, minilm.dim, minilm.is_fallback) == ("all-MiniLM-L6-v2-onnx-int8", 384, False)


def test_vectors_are_float32_rows_of_unit_length(minilm):
    v = minilm.embed(["one text", "another, longer text about memory", ""])
    assert v.dtype == np.float32 and v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_similar_meaning_is_closer_than_shared_topic_words(minilm):
    cat, rug, tax = minilm.embed(["the cat sat on the mat", "a cat was sitting on a rug", "quarterly tax filing deadline"])
    assert cos(cat, rug) > 0.6 > 0.2 > cos(cat, tax)


def test_a_batch_gives_the_same_vectors_as_one_text_at_a_time(minilm):
    texts = ["short", "a somewhat longer sentence about painting a lake sunrise", "Caroline went to a support group"]
    batched = minilm.embed(texts)
    single = np.vstack([minilm.embed([t]) for t in texts])
    assert np.allclose(batched, single, atol=1e-4)


def test_texts_of_many_lengths_in_one_call_get_exactly_the_vectors_they_get_alone(minilm):
    # More texts than one model batch, lengths out of order: each runs beside texts of its own length
    # (the call is cut into batches by token count), and its vector is the one it gets on its own.
    words = "we planned a long camping trip to the lake with the kids and the dog last summer".split()
    texts = [" ".join(words[: 1 + (k * 7) % len(words)]) + f" ({k})" for k in range(3 * minilm.batch_size + 5)]
    batched = minilm.embed(texts)
    for k in (0, 1, 5, len(texts) - 1):
        assert np.array_equal(batched[k], minilm.embed([texts[k]])[0])


def test_vectors_without_the_skip_layer_norm_fusion_match_the_fully_fused_graph_within_float_rounding(minilm, tmp_path):
    # The embedder leaves out one onnxruntime graph rewrite for speed (minilm.DISABLED_OPTIMIZERS): the graph it
    # runs has no fused SkipLayerNormalization node, and its vectors stay the ones every rewrite gives, up to float
    # rounding, since the model name is the same.
    from engram.providers.embeddings import minilm as module

    graph = module.model_files()[1]
    module.open_session(graph, 1, optimized_model_path=tmp_path / "ours.onnx")
    module.open_session(graph, 1, disabled=(), optimized_model_path=tmp_path / "fused.onnx")
    assert b"SkipLayerNormalization" not in (tmp_path / "ours.onnx").read_bytes()
    assert b"SkipLayerNormalization" in (tmp_path / "fused.onnx").read_bytes()

    fused = MiniLmEmbedder(batch_size=minilm.batch_size, threads=1)
    fused.session = module.open_session(graph, 1, disabled=())
    texts = ["Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
             "Melanie loves painting lake sunrises", "short"]
    assert np.abs(minilm.embed(texts) - fused.embed(texts)).max() < 1e-5


def test_the_session_keeps_no_memory_pattern_per_shape_and_gives_the_same_vectors_as_with_one(minilm):
    # The memory-pattern planner keeps a plan per input shape (minilm.open_session); off, the vectors are unchanged.
    from engram.providers.embeddings import minilm as module

    assert minilm.session.get_session_options().enable_mem_pattern is False
    planned = MiniLmEmbedder(batch_size=minilm.batch_size)
    planned.session = module.open_session(module.model_files()[1], mem_pattern=True)
    assert planned.session.get_session_options().enable_mem_pattern is True
    words = "the blue parcel for customer 7 leaves the Porto depot on day 3; please confirm the window".split()
    texts = [" ".join(words[: 1 + (k * 5) % len(words)]) + f" ({k})" for k in range(2 * minilm.batch_size + 3)]
    assert np.array_equal(minilm.embed(texts), planned.embed(texts))


def test_text_beyond_256_tokens_is_cut_like_the_original_model(minilm):
    head = "memory " * 300  # more than 256 word pieces already
    a, b = minilm.embed([head, head + "completely different tail about tax law and quarterly filings"])
    assert np.allclose(a, b, atol=1e-6)


def test_the_hashing_fallback_is_named_as_such_and_measures_word_overlap():
    h = make_embedder(EmbedderConfig(name="hashing"))
    assert isinstance(h, HashingEmbedder) and h.is_fallback and "hashing" in h.name and h.dim == 384
    same, overlap, other = h.embed(["red apple pie", "apple pie recipe", "quarterly tax filing"])
    assert cos(same, overlap) > cos(same, other)
    assert np.allclose(np.linalg.norm(h.embed(["x y z"]), axis=1), 1.0)


def test_the_hashing_embedder_gives_the_same_vector_in_every_process():
    script = "from engram.providers.embeddings.hashing import HashingEmbedder; print(HashingEmbedder().embed(['hello world'])[0][:40].tobytes().hex())"
    runs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout for seed in ("1", "2")}
    assert len(runs) == 1


def test_without_the_model_packages_auto_falls_back_to_hashing_and_warns_once():
    script = (
        "from engram.providers.embeddings import make_embedder\n"
        "a = make_embedder(files=None); b = make_embedder(files=None)\n"
        "print(a.name, b.name)"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "hashing-v1-384 hashing-v1-384"
    assert run.stderr.count("uses the hashing fallback") == 1


def test_asking_for_minilm_explicitly_without_its_packages_is_an_error():
    from engram.config.errors import ConfigError

    with pytest.raises(ConfigError, match="not installed"):
        make_embedder(EmbedderConfig(name="minilm"), files=None)


"""Embed once: a text whose vector is computed already is not computed again (issue 27).

Counted with the real ONNX embedder behind the content-addressed cache, as the home's embedder runs it: what the
model computes is what `texts_computed` counts.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.memory.cognitive.helpers import rec

from engram.events.cognitive import TraceEncoded
from engram.memory.cognitive.indexing import embedded_content, vector_parts
from engram.memory.cognitive.memory import AgentMemory
from engram.providers.embeddings import CachedEmbedder, EmbeddingCache, make_embedder
from engram.providers.llm.offline.condense import summarize_schema

MEMBERS = {
    "m1": "Melanie took a pottery class with her kids last weekend.",
    "m2": "Melanie and her kids made pottery bowls at a class.",
    "m3": "Melanie's kids love the pottery class they go to.",
}


@pytest.fixture(scope="module")
def model():
    embedder = make_embedder()
    if embedder.is_fallback:
        pytest.skip("the MiniLM packages are not installed")
    return embedder


def _encoded(tid: str, content: str, seq: int, source_type: str = "user_statement") -> TraceEncoded:
    return TraceEncoded(trace_id=tid, content=content, trace_type="episodic", scope="discussion", scope_id="d",
                        source_type=source_type, source_seqs=(seq,), importance=0.5, confidence=0.8, strength=0.5,
                        stability_s=3600.0, interval_s=3600.0)


@pytest.mark.parametrize("content_vectors", [False, True], ids=["recall index", "auto-ingest's content vectors"])
def test_a_schema_summary_costs_no_embedding_its_vector_is_its_central_members(model, tmp_path, content_vectors):
    embedder = CachedEmbedder(model, EmbeddingCache(tmp_path / "embeddings.duckdb"))
    mem = AgentMemory("a", embedder.dim, content_vectors=content_vectors)
    mem.apply_batch([rec(_encoded(tid, text, seq), seq=seq) for seq, (tid, text) in enumerate(MEMBERS.items(), 1)],
                    embedder.embed)
    assert embedder.stats.texts_computed == 3

    schema = summarize_schema(list(MEMBERS.values()), max_tokens=200)  # what the offline consolidator writes
    assert "(recurring across 3 memories:" in schema
    mem.apply_batch([rec(_encoded("s", schema, 10, source_type="schema"), seq=10)], embedder.embed)

    assert embedder.stats.texts_computed == 3  # the schema's text was not run through the model
    centre = next(tid for tid, text in MEMBERS.items() if schema.startswith(text))
    np.testing.assert_array_equal(mem.index.vectors(["s"])[0], mem.index.vectors([centre])[0])


def test_only_a_schema_summarys_tail_is_left_out_of_what_is_embedded():
    tail = " (recurring across 3 memories: pottery class, kids)"
    assert embedded_content("Melanie took a pottery class." + tail) == "Melanie took a pottery class."
    assert embedded_content(tail.strip()) == tail.strip()  # nothing before it: the text itself
    said = "She said (recurring across 3 memories: pottery) and went on."
    assert embedded_content(said) == said  # not at the end: not a tail
    assert vector_parts("Yes, last weekend." + tail, "Caroline: Did you go?") == ("Yes, last weekend.", "Caroline: Did you go?")

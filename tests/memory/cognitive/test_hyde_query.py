"""HyDE searches near the mean of the query and its hypothetical memory, not the hypothesis alone (Gao et al. 2022)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.memory.cognitive.helpers import T0, memory_of, reader_query

from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.retrieval import RecallQuery, RecallSettings, recall


# Every memory names Priya, so the query's focus leaves her out (a word more than a tenth of the memories hold);
# three of them say little else.
MEMORIES = {
    "glad": "Priya is so glad to hear that.",
    "connected": "Makes Priya feel connected.",
    "love": "Priya would love to see it!",
    "nurse": "Priya works as a nurse at the city hospital.",
    "counsel": "Priya is keen on counseling or working in mental health.",
    "cello": "Priya plays the cello in a community orchestra.",
    "hiking": "Priya went hiking in the hills last weekend.",
    "cat": "Priya adopted a grey cat from the shelter.",
    "garden": "Priya grows tomatoes and basil on her balcony.",
    "brother": "Priya's brother is studying architecture in Milan.",
    "bread": "Priya bakes sourdough bread every Sunday morning.",
    "novel": "Priya finished reading a mystery novel on the train.",
    "marathon": "Priya is training for a marathon in the spring.",
}


def _recall(mem, embedder, query: str):
    """As the trace reader asks (embedding similarity, to see HyDE's part alone)."""
    settings, focus, hypothesis, q, h = reader_query(mem, embedder, query)
    asked = RecallQuery(query, q, T0, Pad(), limit=len(MEMORIES), discussion="d", focus=focus, hyde_text=hypothesis,
                        hyde_vector=h)
    result = recall(mem, asked, RecallSettings(weights=settings.weights, similarity="embedding", feedback=settings.feedback))
    return result, q, h


NAME_ONLY = ("glad", "connected", "love")


@pytest.mark.parametrize("question, answer", [
    ("What career path has Priya decided to pursue?", "counsel"),
    ("What pet does Priya have?", "cat"),
])
def test_a_hypothetical_memory_that_only_restates_the_question_does_not_lift_memories_that_only_share_the_name(
        embedder, question, answer):
    mem = memory_of(MEMORIES, embedder)
    result, q, h = _recall(mem, embedder, question)
    assert "Priya" not in result.focus and "Priya" in result.hyde.text  # the name: left out of the query, kept in the hypothesis
    vectors = dict(zip(MEMORIES, mem.index.vectors(list(MEMORIES))))
    # Searched alone, the hypothesis is nearly as near the memories that say nothing but her name as the answer.
    assert max(float(vectors[t] @ h) for t in NAME_ONLY) > float(vectors[answer] @ h) - 0.1
    scores = {hit.trace_id: hit.score for hit in result.hits}
    assert result.hits[0].trace_id == answer
    # Near the mean of the question and the hypothesis, they are clearly worse matches than the answer.
    assert scores[answer] - max(scores.get(t, 0.0) for t in NAME_ONLY) > 0.1
    # The HyDE vector is the mean of the query's and the hypothesis' (both unit); similarity ("embedding") is the
    # better of the cosines to the query and to it.
    qu, hu = q / np.linalg.norm(q), h / np.linalg.norm(h)
    mean = (qu + hu) / np.linalg.norm(qu + hu)
    assert result.hits[0].cosine == pytest.approx(max(float(vectors[answer] @ qu), float(vectors[answer] @ mean)), abs=1e-5)

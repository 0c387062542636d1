"""Hybrid similarity gives the keywords less say than the cosine (0.3): a word the question shares with a memory
in another sense does not outrank a memory that answers in other words (engram.config.defaults, retrieval step 2)."""

from __future__ import annotations

from tests.memory.cognitive.helpers import HOUR_US, T0, memory_of, reader_query

from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.retrieval import RecallQuery, RecallSettings, recall


MEMORIES = {
    "work": "Ana worked late at the office again this week.",
    "dinner": "Ben cooked pasta for dinner with his sister.",
    "weather": "It rained all weekend, so everyone stayed home.",
    "football": "The kids play football in the park on Sundays.",
    "novel": "Ben is reading a novel about sailing.",
    "garden": "Ana planted tomatoes in the garden.",
    "trip": "Ben drove to the coast to visit his parents.",
    "cat": "The cat knocked a glass off the kitchen table.",
    "movie": "Ana and Ben watched an old movie on Friday.",
    "car": "Ben's car needed new brakes.",
    "birthday": "Ana's birthday party was at a small restaurant.",
    "bike": "Ana bought a second-hand bike.",
    "cello": "Ana has been learning the cello for two years.",
    "surgeon": "The surgeon cleaned every instrument before the operation.",
}


def _recall(embedder, query: str):
    """As the trace reader asks: the focused query's embedding, the offline heuristic's hypothetical memory, the
    feedback stage, hybrid similarity at its default share."""
    mem = memory_of(MEMORIES, embedder)
    settings, focus, hypothesis, q, h = reader_query(mem, embedder, query)
    asked = RecallQuery(query, q, T0 + HOUR_US, Pad(), limit=3, discussion="d", focus=focus, hyde_text=hypothesis,
                        hyde_vector=h)
    return recall(mem, asked, RecallSettings(weights=settings.weights, hyde=settings.hyde, feedback=settings.feedback))


def test_a_memory_that_answers_in_other_words_outranks_one_that_shares_the_questions_word_in_another_sense(embedder):
    result = _recall(embedder, "What instrument does Ana play?")
    hits = {h.trace_id: h for h in result.hits}
    assert result.similarity == "hybrid"
    # The surgeon's "instrument" is the better keyword match, the cello the better match by meaning ...
    assert hits["surgeon"].lexical > hits["cello"].lexical and hits["cello"].cosine > hits["surgeon"].cosine
    # ... and the meaning decides: with equal say (0.5) the shared word put the surgeon first.
    assert result.hits[0].trace_id == "cello"

"""One memory per source: what a hit already shows (its messages, and the question it answers) takes one place."""

from __future__ import annotations

from tests.memory.cognitive.helpers import T0, rec

from engram.config.agent import AgentConfig
from engram.events.cognitive import TraceEncoded
from engram.memory.cognitive.memory import AgentMemory
from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.retrieval import RecallQuery, RecallSettings, recall


# (trace id, content, its message, the question it answers and that question's message)
MEMORIES = [
    ("asked", "Ana: Ben, what did you cook for the party on Saturday?", "D1:1", "", ""),
    ("paella", "Ben cooked a big pot of seafood paella.", "D1:2", "Ana: Ben, what did you cook for the party on Saturday?", "D1:1"),
    ("curry", "Ben cooked a spicy lentil curry for his sister's birthday.", "D3:4", "", ""),
    ("work", "Ana worked late at the office again this week.", "D2:1", "", ""),
    ("weather", "It rained all weekend, so everyone stayed home.", "D2:2", "", ""),
    ("football", "The kids play football in the park on Sundays.", "D2:3", "", ""),
    ("novel", "Ana is reading a novel about sailing.", "D2:4", "", ""),
]


def _memory(embedder) -> AgentMemory:
    mem = AgentMemory("a", embedder.dim)
    recs = [rec(TraceEncoded(trace_id=tid, content=text, trace_type="episodic", scope="discussion", scope_id="d",
                             source_type="user_statement", source_seqs=(seq,), importance=0.5, confidence=0.8, strength=0.5,
                             stability_s=3600.0, interval_s=3600.0, source_message_ids=(message,), context=context,
                             context_message_ids=(asked,) if asked else ()), seq=seq)
            for seq, (tid, text, message, context, asked) in enumerate(MEMORIES, 1)]
    mem.apply_batch(recs, embedder.embed)
    return mem


def test_the_message_of_the_question_a_hit_answers_is_not_returned_again_on_its_own(embedder):
    mem = _memory(embedder)
    settings = RecallSettings.of(AgentConfig())
    query = "What did Ben cook for the party?"
    result = recall(mem, RecallQuery(query, embedder.embed([query])[0], T0, Pad(), limit=2, discussion="d"),
                    RecallSettings(weights=settings.weights, feedback=settings.feedback))
    first = result.hits[0]
    assert first.trace_id == "paella"
    # The hit shows the question it answers, with that question's message...
    assert first.context.startswith("Ana: Ben, what did you cook") and first.context_message_ids == ("D1:1",)
    # ...so the memory made of that message alone says nothing more, and the place goes to another message.
    assert [h.trace_id for h in result.hits] == ["paella", "curry"]
    assert result.candidates > 2

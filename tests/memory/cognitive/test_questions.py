"""A stored question is evidence of interest, not of a fact (issue 24): it ranks below the statements that answer the
query (QUESTION_WEIGHT), a question brings the reply that answered it and never ranks above it; what a hit shows is
shaped for the prompt (`engram.memory.cognitive.shown`)."""

from __future__ import annotations

import pickle

from engram.config import defaults as d
from engram.events.cognitive import TraceEncoded
from engram.memory.cognitive.indexing import asks
from engram.memory.cognitive.memory import AgentMemory
from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.retrieval import RecallQuery, RecallSettings, recall
from engram.memory.cognitive.shown import shown_texts, snippet

from tests.memory.cognitive.helpers import HOUR_US, T0, Held, reader_query, rec

FILLERS = {
    "trip": "User: We booked a flight to Lisbon for May 3rd.",
    "reunion": "User: I'm planning meals for the family reunion next month.",
    "garden": "User: I planted tomatoes in the garden.",
    "bike": "User: I bought a second-hand bike.",
    "cello": "User: I have been learning the cello for two years.",
}


def _memory(embedder, traces: dict[str, tuple[str, str, tuple[str, ...]]]) -> AgentMemory:
    """trace id -> (content, context, context message ids); trace k is made from message D1:k."""
    mem = AgentMemory("a", embedder.dim)
    mem.apply_batch([rec(TraceEncoded(trace_id=tid, content=text, trace_type="episodic", scope="discussion", scope_id="d",
                                      source_type="user_statement", source_seqs=(seq,), importance=0.5, confidence=0.8,
                                      strength=0.5, stability_s=3600.0, interval_s=3600.0,
                                      source_message_ids=(f"D1:{seq}",), context=context,
                                      context_message_ids=context_ids), seq=seq)
                     for seq, (tid, (text, context, context_ids)) in enumerate(traces.items(), 1)], embedder.embed)
    return mem


def _recall(mem, embedder, query: str, *, question_weight: float = d.QUESTION_WEIGHT, link: bool = True, limit: int = 5):
    settings, focus, hypothesis, q, h = reader_query(mem, embedder, query)
    asked = RecallQuery(query, q, T0 + HOUR_US, Pad(), limit=limit, discussion="d", focus=focus, hyde_text=hypothesis,
                        hyde_vector=h)
    memory = Held(mem.book, mem.index, mem.lexical, answers_of=mem.answers_of if link else None)
    return recall(memory, asked, RecallSettings(weights=settings.weights, hyde=settings.hyde, feedback=settings.feedback,
                                                question_weight=question_weight))


def test_a_statement_that_answers_outranks_a_stored_question_that_resembles_the_query(embedder):
    mem = _memory(embedder, {
        "fact": ("User: My sister Ines is allergic to penicillin and she is vegetarian.", "", ()),
        **{k: (v, "", ()) for k, v in FILLERS.items()},
        "question": ("User: What is my sister allergic to, and what does she eat?", "", ()),
    })
    before = _recall(mem, embedder, "What is my sister allergic to?", question_weight=1.0, link=False)
    assert before.hits[0].trace_id == "question"  # the report: the question resembles the query more
    after = _recall(mem, embedder, "What is my sister allergic to?")
    assert [h.trace_id for h in after.hits[:2]] == ["fact", "question"]
    assert after.hits[1].asks and not after.hits[0].asks


def test_a_question_brings_the_reply_that_answered_it_which_shows_the_question(embedder):
    mem = _memory(embedder, {
        "question": ("Ana: Where did you travel in May?", "", ()),
        **{k: (v, "", ()) for k, v in FILLERS.items() if k != "trip"},
        "reply": ("Ben: Porto, with my brother, by train.", "Ana: Where did you travel in May?", ("D1:1",)),
    })
    assert mem.answers_of("question") == ["reply"]
    hits = {h.trace_id: h for h in _recall(mem, embedder, "Where did Ana ask about travelling?").hits}
    # The reply is returned with the question it answers; the question's own trace gives its place (one memory per
    # source: the reply already shows that message).
    assert hits["reply"].context == "Ana: Where did you travel in May?" and hits["reply"].context_message_ids == ("D1:1",)
    assert "question" not in hits
    assert hits["reply"].shown == "Ana: Where did you travel in May?\nBen: Porto, with my brother, by train."


def test_a_question_never_ranks_above_a_listed_reply_to_it(embedder):
    # The question matches the query word for word, the reply hardly at all: without the link the question leads.
    mem = _memory(embedder, {
        "question": ("Ana: Which instrument did your grandfather play at weddings?", "", ()),
        **{k: (v, "", ()) for k, v in FILLERS.items()},
        "reply": ("Ben: The accordion, every summer.", "Ana: Which instrument did your grandfather play at weddings?",
                  ("D1:1",)),
    })
    query = "Which instrument did the grandfather play at weddings?"
    unlinked = [h.trace_id for h in _recall(mem, embedder, query, question_weight=1.0, link=False, limit=8).hits]
    linked = [h.trace_id for h in _recall(mem, embedder, query, limit=8).hits]
    assert "reply" in linked and ("question" not in linked or linked.index("reply") < linked.index("question"))
    assert unlinked.index("question") < unlinked.index("reply")


def test_only_a_message_that_asks_and_states_nothing_counts_as_a_question():
    assert asks("User: What is my sister allergic to, and what does she eat?")
    assert asks("Caroline: Did you go? [shares a photo: a dog on a beach]")
    assert not asks("Melanie: Wow, that's cool! What happened?")  # a reply that also states something keeps its place
    assert not asks("I like tea.")


def test_the_question_flag_survives_a_snapshot_from_before_it(embedder):
    mem = _memory(embedder, {"question": ("Ana: Where did you travel in May?", "", ()),
                             "reply": ("Ben: Porto.", "Ana: Where did you travel in May?", ("D1:1",))})
    t = mem.book.traces["question"]
    del t.__dict__["asks"]  # as pickled before the flag existed
    del mem.__dict__["answers"]
    back = pickle.loads(pickle.dumps(mem))
    assert back.book.traces["question"].asks and not back.book.traces["reply"].asks
    assert back.answers_of("question") == ["reply"]


def test_the_shown_text_never_repeats_a_sentence_of_a_better_hit():
    shown = shown_texts([("Mel: I ran a charity race for mental health last Saturday. It felt great.", ""),
                         ("Mel: I ran a charity race for mental health last Saturday.", "Caroline: What did you do?"),
                         ("Mel: Thanks! It felt great.", "")], "What did Mel do last Saturday?")
    assert shown[0] == "Mel: I ran a charity race for mental health last Saturday. It felt great."
    assert shown[1] == "Caroline: What did you do?"  # its content is what the better hit already shows
    assert shown[2] == "Mel: Thanks! It felt great."  # a sentence under four words is no evidence repeated: kept


def test_a_long_hit_below_the_best_three_is_shown_as_the_sentences_that_share_the_querys_words():
    long = ("Melanie: We had a lovely weekend. The kids played in the park all morning. Then I went to my pottery "
            "class and made a bowl. After that we ate pizza and watched a film together at home.")
    hits = [("A: one.", ""), ("B: two.", ""), ("C: three.", ""), (long, "Caroline: How was your weekend? What else?")]
    shown = shown_texts(hits, "What class does Melanie take?")
    assert shown[3] == ("Caroline: What else?\n"
                        "Melanie: Then I went to my pottery class and made a bowl. …")
    assert shown_texts([(long, "")], "What class does Melanie take?") == [long]  # the best three are shown whole
    assert snippet("Melanie: Short one.", {"class"}, 25) == "Melanie: Short one."

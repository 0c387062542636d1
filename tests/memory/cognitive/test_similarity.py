"""Similarity: the keyword match, hybrid fusion with the cosine, what a trace is indexed by, Hebbian firing."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from tests.memory.cognitive.helpers import T0, Held, rec, unit

from engram.config import defaults as d
from engram.config.agent import AgentConfig
from engram.events.cognitive import TraceEncoded, TracePruned, TraceRetrieved
from engram.events.control import DiscussionForgotten
from engram.memory.cognitive.book import TraceBook
from engram.memory.cognitive.indexing import index_text, reply_context
from engram.memory.cognitive.lexical import LexicalIndex
from engram.memory.cognitive.memory import AgentMemory, VECTOR_TEXT
from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.retrieval import FeedbackSettings, RecallQuery, RecallSettings, recall
from engram.providers.search.bm25 import BM25

MAY_8_2023_US = 1_683_554_160 * 1_000_000  # 1:56 pm on 8 May 2023, UTC


def test_a_trace_of_average_length_holding_every_query_word_once_is_a_full_lexical_match():
    lex = LexicalIndex()
    lex.add("both", "pottery class")
    lex.add("one", "pottery wheel")
    lex.add("none", "camping trip")
    terms = lex.terms("the pottery class?")
    found = dict(lex.search(terms, 5))
    assert found["both"] == pytest.approx(1.0)
    pottery, klass = (lex.bm25.idf(t) for t in terms)  # the query's words as the index spells them
    assert found["one"] == pytest.approx(pottery / (pottery + klass))
    assert "none" not in found and lex.match(terms, ["none"]) == {"none": 0.0}
    assert lex.match(terms, ["one"])["one"] == pytest.approx(found["one"])
    assert lex.search(lex.terms("violin"), 5) == []  # no word the index knows: no lexical evidence


def test_removing_a_document_leaves_bm25_as_if_it_had_never_been_added():
    a, b = BM25(), BM25()
    for key, text in (("x", "red apple pie"), ("y", "green apple"), ("z", "blue sky today")):
        a.add(key, text)
        if key != "z":
            b.add(key, text)
    a.remove("z")
    assert a.query("apple pie sky", 5) == b.query("apple pie sky", 5)
    assert "z" not in a and a.scores(["sky"], ["z"]) == {"z": 0.0}
    assert a.query("apple", 5, allowed=lambda k: k != "x") == b.query("apple", 5, allowed=lambda k: k == "y")


def _memory(texts: dict[str, tuple[str, np.ndarray]], scopes: dict[str, str] | None = None) -> AgentMemory:
    """An agent memory folded from TraceEncoded events; the vectors stand in for the embedder."""
    mem = AgentMemory("a", 8)
    vectors = {}
    recs = []
    for seq, (tid, (content, vector)) in enumerate(texts.items(), 1):
        scope_id = (scopes or {}).get(tid, "d")
        ev = TraceEncoded(
            trace_id=tid, content=content, trace_type="episodic", scope="discussion", scope_id=scope_id,
            source_type="user_statement", source_seqs=(seq,), importance=0.5, confidence=0.8, strength=0.5,
            stability_s=3600.0, interval_s=3600.0, source_message_ids=(f"D1:{seq}",),
        )
        vectors[content] = vector
        recs.append(rec(ev, seq=seq, stream=scope_id))
    mem.apply_batch(recs, lambda ts: np.stack([vectors[t] for t in ts]))
    return mem


def _ask(mem: AgentMemory, query: str, vector: np.ndarray, *, limit: int = 3, discussion: str | None = None, **settings):
    """Recall with similarity to the query alone (the feedback stage, which blends in a second query, is tested
    on its own below); `settings`: RecallSettings' fields."""
    settings.setdefault("pool", 1)
    settings.setdefault("feedback", FeedbackSettings(traces=0))
    return recall(mem, RecallQuery(query, vector, T0, Pad(), limit=limit, discussion=discussion), RecallSettings(**settings))


def test_hybrid_similarity_weighs_the_cosine_0_7_and_the_lexical_match_0_3():
    assert d.SIMILARITY_LEXICAL_SHARE == 0.3
    assert RecallSettings.of(AgentConfig()).similarity == "hybrid"
    mem = _memory({"pottery": ("Melanie took a pottery class", unit(1, 1)), "other": ("we went hiking", unit(1, 0.2))})
    result = _ask(mem, "pottery class", unit(1, 0), pool=5)
    assert result.similarity == "hybrid"
    for h in result.hits:
        assert h.factors.similarity == pytest.approx(0.7 * h.cosine + 0.3 * h.lexical)
    assert {h.trace_id: h.cosine for h in result.hits} == pytest.approx({"pottery": np.sqrt(0.5), "other": 1 / np.sqrt(1.04)})
    assert result.hits[0].trace_id == "pottery" and result.hits[0].lexical > 0.5


def test_keywords_find_the_trace_that_names_the_rare_word_even_outside_the_nearest_by_embedding():
    # Cosines as a sentence embedder gives them: the chats 0.60 down to 0.38, the named memory 0.33.
    texts = {f"near{i}": (f"a chat about weekend plans number {i}", unit(1, 1.33 + 0.1 * i)) for i in range(12)}
    texts["named"] = ("Caroline went to an LGBTQ support group", unit(0.35, 1))
    mem = _memory(texts)
    query = "When did Caroline go to the LGBTQ support group?"
    hybrid = _ask(mem, query, unit(1, 0))
    top = hybrid.hits[0]
    assert (top.trace_id, top.via) == ("named", "keywords")
    literal = _ask(mem, query, unit(1, 0), similarity="embedding")
    assert literal.similarity == "embedding" and "named" not in [h.trace_id for h in literal.hits]
    for h in literal.hits:
        assert h.factors.similarity == pytest.approx(max(0.0, h.cosine)) and h.lexical == 0.0
    with pytest.raises(ValueError):
        _ask(mem, query, unit(1, 0), similarity="keywords")


def test_without_a_word_the_index_knows_similarity_is_the_cosine():
    mem = _memory({"a": ("pottery class", unit(1, 0.5)), "b": ("hiking trip", unit(1, 2))})
    result = _ask(mem, "violin?", unit(1, 0), pool=5)
    for h in result.hits:
        assert h.factors.similarity == pytest.approx(h.cosine)


def test_keyword_candidates_stay_in_the_discussion_scope():
    mem = _memory(
        {"here": ("pottery here", unit(0, 1)), "there": ("pottery there", unit(0, 1, 0.1))}, scopes={"there": "e"}
    )
    found = [h.trace_id for h in _ask(mem, "pottery", unit(1, 0), discussion="d").hits]
    assert found == ["here"]


def test_similarity_is_configured_per_agent_and_nothing_else_is_accepted():
    cfg = AgentConfig.model_validate({"memory": {"retrieval": {"similarity": "embedding"}}})
    assert RecallSettings.of(cfg).similarity == "embedding"
    with pytest.raises(ValidationError):
        AgentConfig.model_validate({"memory": {"retrieval": {"similarity": "keywords"}}})


def test_the_keyword_index_follows_the_fold_and_is_rebuilt_the_same_from_the_book():
    mem = _memory({"a": ("pottery class", unit(1)), "b": ("pottery wheel", unit(1, 1)), "c": ("camping", unit(0, 1))},
                  scopes={"c": "e"})
    terms = mem.lexical.terms("pottery class")
    mem.apply_batch([rec(TracePruned(trace_id="b", strength=0.01), seq=10)], lambda t: None)
    mem.apply_batch([rec(DiscussionForgotten(discussion_id="e"), seq=11, stream="e")], lambda t: None)
    assert len(mem.lexical) == 1 and "b" not in mem.lexical and "c" not in mem.lexical
    before = mem.lexical.search(terms, 5)
    mem.restore_lexical()
    assert mem.lexical.search(terms, 5) == before == [("a", pytest.approx(1.0))]


def test_a_reply_is_indexed_with_the_question_it_answers_and_the_day_it_was_said():
    previous = ("Melanie", "Hey! That sounds great. What did you do last weekend? I painted a lake.")
    assert reply_context(previous, "Caroline") == "Melanie: What did you do last weekend?"
    assert reply_context(previous, "Melanie") == ""  # not a reply to oneself
    assert reply_context(("Melanie", "I painted a lake."), "Caroline") == ""  # nothing was asked
    assert reply_context(None, "Caroline") == ""
    assert reply_context(("Melanie", "why? " * 200), "Caroline") == ("Melanie: " + "why? " * 200)[: d.REPLY_CONTEXT_MAX_CHARS]
    text = index_text("Caroline: We went camping with the kids!", "Melanie: What did you do last weekend?", MAY_8_2023_US)
    assert text == "Melanie: What did you do last weekend?\nCaroline: We went camping with the kids!\n(8 May 2023)"


def test_the_context_finds_a_reply_but_is_not_part_of_what_recall_returns():
    mem = AgentMemory("a", 8)
    ev = TraceEncoded(
        trace_id="reply", content="Caroline: Yes, last weekend, with the kids!", trace_type="episodic", scope="discussion",
        scope_id="d", source_type="user_statement", source_seqs=(2,), importance=0.5, confidence=0.8, strength=0.5,
        stability_s=3600.0, interval_s=3600.0, source_message_ids=("D1:2",), context="Melanie: Did you go camping?",
    )
    embedded = []
    mem.apply_batch([rec(ev, seq=2, ts_us=MAY_8_2023_US)], lambda ts: embedded.extend(ts) or np.stack([unit(1)] * len(ts)))
    # The vector is made of the content's and the question's embeddings; the day is in the keyword entry.
    assert embedded == ["Caroline: Yes, last weekend, with the kids!", "Melanie: Did you go camping?"]
    assert mem.lexical.terms("May 2023") and mem.lexical.search(mem.lexical.terms("May 2023"), 1)[0][0] == "reply"
    hit = _ask(mem, "camping in May", unit(0, 1)).hits[0]
    assert hit.trace_id == "reply" and hit.lexical > 0 and hit.content == "Caroline: Yes, last weekend, with the kids!"
    # Deduplication asks what memories say: a memory with content vectors embeds the content alone.
    plain = AgentMemory("a", 8, content_vectors=True)
    embedded.clear()
    plain.apply_batch([rec(ev, seq=2, ts_us=MAY_8_2023_US)], lambda ts: embedded.extend(ts) or np.stack([unit(1)]))
    assert embedded == ["Caroline: Yes, last weekend, with the kids!"] and plain.lexical is None


def test_a_trace_without_a_question_is_embedded_by_the_same_text_deduplication_embeds():
    ev = TraceEncoded(
        trace_id="fact", content="Caroline went camping with the kids.", trace_type="episodic", scope="discussion",
        scope_id="d", source_type="user_statement", source_seqs=(2,), importance=0.5, confidence=0.8, strength=0.5,
        stability_s=3600.0, interval_s=3600.0, source_message_ids=("D1:2",),
    )
    asked: list[list[str]] = []
    for memory in (AgentMemory("a", 8), AgentMemory("a", 8, content_vectors=True)):  # recall's index, dedup's index
        memory.apply_batch([rec(ev, seq=2, ts_us=MAY_8_2023_US)], lambda ts: asked.append(list(ts)) or np.stack([unit(1)]))
    assert asked == [["Caroline went camping with the kids."]] * 2  # one text: the home's embedder computes it once


def test_a_memory_restored_with_vectors_of_the_day_embedding_embeds_its_traces_again():
    import pickle

    mem = _memory({"x": ("we went hiking", unit(1, 0.2)), "y": ("Melanie took a pottery class", unit(1, 1))})
    mem.vector_text = "index text"  # as a snapshot from before the day left the embedding
    old = pickle.loads(pickle.dumps(mem))
    del old.__dict__["vector_text"]
    restored = pickle.loads(pickle.dumps(old))
    assert restored.vector_text == "index text"
    asked = []
    restored.reembed(lambda ts: asked.extend(ts) or np.stack([unit(0, 1), unit(1, 0)]))
    assert asked == ["we went hiking", "Melanie took a pottery class"] and restored.vector_text == VECTOR_TEXT
    assert restored.nearest(unit(1, 0), 1)[0][0] == "y"


def test_only_traces_the_query_found_wire_together():
    book = TraceBook("a")
    for seq, tid in enumerate(("s", "k", "act", "h"), 1):
        book.apply(rec(TraceEncoded(
            trace_id=tid, content=tid, trace_type="episodic", scope="discussion", scope_id="d",
            source_type="user_statement", source_seqs=(seq,), importance=0.5, confidence=0.8, strength=0.5,
            stability_s=3600.0, interval_s=3600.0,
        ), seq=seq))
    book.apply(rec(TraceRetrieved(query="q", trace_ids=("s", "act", "k", "h"), via=("similarity", "activation", "keywords", "hyde")), seq=9))
    pairs = {(e.src, e.dst) for e in book.graph.edges.values() if e.kind == "co_activated"}
    assert pairs == {("k", "s"), ("h", "s"), ("h", "k")}
    assert all(book.traces[t].retrieval_count == 1 for t in ("s", "k", "act", "h"))  # all of them are reinforced
    assert book.graph.edges[("k", "s", "co_activated")].weight == pytest.approx(d.HEBBIAN_RATE)


def test_a_compound_is_found_however_it_is_written():
    """Issue 12, finding 5: "destress" missed the trace "Dancing helps Jon de-stress" (toy stemmer, no compounds)."""
    lex = LexicalIndex()
    lex.add("dancing", "Dancing helps Jon de-stress.")
    lex.add("cooking", "Gina cooks pasta on Sundays.")
    for query in ("How do Jon and Gina both like to destress?", "de-stress", "how does he de stress"):
        found = dict(lex.search(lex.terms(query), 5))
        assert next(iter(found), None) == "dancing", query
    # Snowball stems: inflections meet ("relaxing" / "relaxed", "activities" / "activity").
    lex.add("relax", "Yoga relaxed her after work and other activities.")
    assert dict(lex.search(lex.terms("relaxing activity"), 5)).keys() >= {"relax"}


def test_a_keyword_index_from_an_older_tokenizer_is_rebuilt_when_a_snapshot_is_restored():
    import pickle

    mem = _memory({"t1": ("Dancing helps Jon de-stress.", unit(1))})
    mem.lexical.bm25.tokenizer = 1  # as a snapshot taken before the Snowball tokenizer would say
    mem.lexical.bm25._postings.clear()
    restored = pickle.loads(pickle.dumps(mem))
    assert restored.lexical.bm25.current
    assert [k for k, _ in restored.lexical.search(restored.lexical.terms("destress"), 3)] == ["t1"]


def test_a_superseded_or_disputed_trace_never_outranks_its_correction():
    """Issue 12, finding 3: the Lisbon trace outranked the correction "I moved to Porto, not Lisbon"."""
    from engram.events.cognitive import ConflictResolved

    mem = _memory({
        "lisbon": ("User: Hi, my name is Priya and I live in Lisbon.", unit(1, 0.1)),
        "porto": ("User: Actually I moved to Porto, not Lisbon.", unit(0.3, 1)),
        "other": ("User: I like green tea.", unit(0, 0, 1)),
    })
    # An agreeable agent keeps both versions (keep_both): the older one stays active, contradicted.
    mem.apply_batch([rec(ConflictResolved(winner="porto", loser="lisbon", resolution="keep_both"), seq=9)],
                    lambda texts: np.zeros((0, 8), np.float32))
    assert mem.book.traces["lisbon"].active and mem.book.traces["lisbon"].contradicted_by == ("porto",)
    result = _ask(mem, "where does Priya live, Lisbon?", unit(1, 0.1), limit=3, pool=1)
    order = [h.trace_id for h in result.hits]
    assert order.index("porto") < order.index("lisbon")
    assert next(h.via for h in result.hits if h.trace_id == "porto") in ("correction", "similarity", "keywords")


def test_the_query_is_embedded_without_the_words_most_of_the_agents_memories_hold():
    lex = LexicalIndex()
    for i in range(9):
        lex.add(f"t{i}", f"Ana talked about her day number {i}")
    lex.add("pottery", "Ana signed up for a pottery class")
    # "Ana" is in every memory: it cannot tell them apart, so the embedding of the question leaves it out.
    assert lex.focus("What does Ana like about pottery?", 0.1) == "What does like about pottery?"
    # Nothing common: the question as asked; only common content words: the question as asked too.
    assert lex.focus("Why pottery?", 0.1) == "Why pottery?"
    assert lex.focus("How is Ana?", 0.1) == "How is Ana?"
    assert lex.focus("What does Ana like about pottery?", 1.0) == "What does Ana like about pottery?"
    assert LexicalIndex().focus("Ana?", 0.1) == "Ana?"
    assert RecallSettings.of(AgentConfig()).focus_common_share == d.QUERY_FOCUS_COMMON_SHARE == 0.1


def _pottery_memory():
    """A pottery memory near "How does Ana unwind?", a clay memory that shares its words but none of the question's
    and lies farthest from it, and ten memories merely near the question."""
    traces = {
        "pottery": ("Ana unwinds at her pottery class, shaping clay on the wheel", unit(1, 1)),
        "clay": ("the wheel and the clay kept her hands busy all evening", unit(0, 1)),
    }
    for i in range(10):
        angle = i * np.pi / 20
        traces[f"noise{i}"] = (f"a neighbour's dog barked {i} times", unit(1, 0, 4.9 * np.cos(angle), 4.9 * np.sin(angle)))  # cosine 0.2
    return traces, _memory(traces)


def test_feedback_finds_a_memory_that_shares_the_first_hits_words_but_none_of_the_questions():
    # "How does Ana unwind?" finds the pottery memory; the clay memory says nothing the question says and is
    # the farthest from it by embedding (outside the first stage), but it shares the pottery memory's words
    # and lies towards it: the feedback query brings it in, above memories that are merely near the question.
    traces, mem = _pottery_memory()
    without = _ask(mem, "How does Ana unwind?", unit(1, 0), pool=1, limit=2)
    assert "clay" not in {h.trace_id for h in without.hits} and without.feedback_share == 0.0
    assert without.candidates < len(traces)  # clay was not even a candidate
    result = _ask(mem, "How does Ana unwind?", unit(1, 0), pool=1, limit=2, feedback=FeedbackSettings(traces=1))
    assert [h.trace_id for h in result.hits] == ["pottery", "clay"]
    clay = result.hits[1]
    assert clay.via == "feedback" and clay.lexical == 0.0 and clay.feedback > 0
    assert result.feedback_traces == ("pottery",) and {"clay", "wheel"} <= set(result.feedback_terms)
    share = d.FEEDBACK_SHARE
    base = 0.5 * max(0.0, clay.cosine) + 0.5 * clay.lexical
    assert clay.factors.similarity == pytest.approx((1 - share) * base + share * clay.feedback)


class _CountingIndex:
    """The agent's vector index, counting the searches a recall makes."""

    def __init__(self, index):
        self.index, self.searches = index, 0

    def search(self, vector, k, allowed=None):
        self.searches += 1
        return self.index.search(vector, k, allowed)

    def vectors(self, keys):
        return self.index.vectors(keys)

    def __contains__(self, key):
        return key in self.index


def test_feedback_ranks_by_the_stored_vectors_of_the_first_hits_without_a_second_vector_search():
    # The feedback query's vector is the query's plus the mean stored vector of the best first hits; it is compared
    # with the candidates' stored vectors, never searched: a recall with feedback makes the one vector search a
    # recall without it makes. Its new candidates come from its words, through the keyword index ("clay" below).
    traces, mem = _pottery_memory()
    plain, fed = _CountingIndex(mem.index), _CountingIndex(mem.index)
    asked = RecallQuery("How does Ana unwind?", unit(1, 0), T0, Pad(), limit=2)
    off = recall(Held(mem.book, plain, mem.lexical), asked, RecallSettings(pool=1, feedback=FeedbackSettings(traces=0)))
    on = recall(Held(mem.book, fed, mem.lexical), asked, RecallSettings(pool=1, feedback=FeedbackSettings(traces=1)))
    assert plain.searches == fed.searches == 1
    assert off.candidates < len(traces) and on.feedback_traces == ("pottery",)
    assert "clay" not in {h.trace_id for h in off.hits} and [h.trace_id for h in on.hits] == ["pottery", "clay"]
    clay = on.hits[1]
    assert clay.via == "feedback"
    feedback_vector = unit(1, 0) + mem.index.vectors(["pottery"])[0]
    feedback_vector /= np.linalg.norm(feedback_vector)
    cosine = float(mem.index.vectors(["clay"])[0] @ feedback_vector)
    keywords = clay.feedback * 2 - cosine  # the feedback similarity is the equal mean of the two, as for the query
    assert 0 < keywords <= 1 and clay.feedback == pytest.approx(0.5 * cosine + 0.5 * keywords)
    assert cosine == pytest.approx(np.cos(3 * np.pi / 8), abs=1e-5)  # 22.5° from the query's side, towards pottery


def test_feedback_is_on_by_default_and_made_of_the_three_best_first_hits():
    s = RecallSettings.of(AgentConfig()).feedback
    assert (s.traces, s.terms, s.term_weight, s.share) == (3, 10, 0.5, 0.5)


def test_explain_shows_the_focused_query_the_feedback_words_and_each_hits_three_parts():
    from engram.api import types as t
    from engram.cli.recall import render

    hit = t.RecallHit(rank=1, trace_id="pottery", score=0.5, content="Ana took a pottery class",
                      factors={"similarity": 0.6}, similarity_parts={"cosine": 0.7, "lexical": 0.4, "feedback": 0.65},
                      contributions={"similarity": 0.39}, trace_type="episodic", category="event", scope="discussion",
                      scope_id="d", via="feedback", source_seqs=[1], source_message_ids=["m1"])
    result = t.RecallResponse(query="What does Ana do to relax?", agent="a", discussion="d", now_us=T0, candidates=9,
                              similarity="hybrid", weights={"similarity": 0.65}, mood=t.Mood(valence=0, arousal=0, dominance=0),
                              hyde=None, hits=[hit], focus="What does do to relax?",
                              feedback=t.Feedback(share=0.5, traces=["pottery", "x", "y"], terms=["pottery", "clay"]))
    out = render(result, explain=True)
    assert 'query embedded as: "What does do to relax?"' in out
    assert ("feedback: similarity = 0.50 · to the query + 0.50 · to the feedback query "
            "(the query + the stored vectors of the 3 best first hits; added terms, searched by keywords: pottery, clay)") in out
    assert "(cosine 0.700, keywords 0.400, feedback 0.650)" in out and "via feedback" in out
    plain = render(result, explain=False)
    assert "feedback:" not in plain and "query embedded as" not in plain


def test_the_traces_of_one_reply_share_the_embedding_of_its_question_and_are_found_by_it():
    """A reply's traces are indexed by their content and the question they answer: the question is embedded once
    for all of them, each trace's vector combines the two, and no "question + content" text is embedded."""
    from engram.memory.cognitive.indexing import combine

    question = "Melanie: What did you do last weekend?"
    events = [
        TraceEncoded(trace_id=tid, content=content, trace_type="episodic", scope="discussion", scope_id="d",
                     source_type="user_statement", source_seqs=(3,), importance=0.5, confidence=0.8, strength=0.5,
                     stability_s=3600.0, interval_s=3600.0, source_message_ids=("D1:3",), context=question)
        for tid, content in (("camp", "Caroline went camping."), ("kids", "Caroline took the kids."))
    ]
    vectors = {"Caroline went camping.": unit(1, 0, 0), "Caroline took the kids.": unit(0, 1, 0), question: unit(0, 0, 1)}
    asked: list[list[str]] = []
    mem = AgentMemory("a", 8)
    mem.apply_batch([rec(e, seq=3 + k, ts_us=MAY_8_2023_US) for k, e in enumerate(events)],
                    lambda ts: asked.append(list(ts)) or np.stack([vectors[t] for t in ts]))
    assert asked == [["Caroline went camping.", question, "Caroline took the kids."]]  # the question once
    stored = mem.index.vectors(["camp", "kids"])
    assert np.allclose(stored[0], combine(np.stack([unit(1, 0, 0), unit(0, 0, 1)])), atol=1e-6)
    assert abs(float(stored[0] @ stored[0]) - 1.0) < 1e-5
    # The question alone finds both answers before anything else.
    assert {tid for tid, _ in mem.nearest(unit(0, 0, 1), 2)} == {"camp", "kids"}

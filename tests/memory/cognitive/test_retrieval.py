"""Recall: the six-factor composite, per-call weights, scope, spreading activation, HyDE's adaptive threshold."""

from __future__ import annotations

import numpy as np
import pytest
from tests.memory.cognitive.helpers import HOUR_US, T0, Held, rec, trace, unit

from engram.config.agent import AgentConfig
from engram.events.cognitive import EdgeAdded, TraceEncoded
from engram.memory.cognitive.book import TraceBook
from engram.memory.cognitive.hyde import HydeSettings, adaptive_search, thresholds
from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.retrieval import FeedbackSettings, RecallQuery, RecallSettings, limit_for, recall
from engram.memory.cognitive.scoring import DEFAULT_WEIGHTS, Factors, factors, weights_with
from engram.providers.search.hnsw import HnswIndex


def test_weights_come_from_the_agent_configuration_and_sum_to_one_by_default():
    w = RecallSettings.of(AgentConfig()).weights
    assert w == DEFAULT_WEIGHTS
    assert w.total() == pytest.approx(1.0)
    custom = AgentConfig.model_validate({"memory": {"retrieval": {"weights": {"graphActivation": 0.5}}}})
    assert RecallSettings.of(custom).weights.activation == 0.5


def test_per_call_overrides_replace_the_configured_weights_and_unknown_factors_are_refused():
    w = weights_with(DEFAULT_WEIGHTS, {"similarity": 1.0, "emotionalCongruence": 0.0})
    assert (w.similarity, w.emotional, w.strength) == (1.0, 0.0, DEFAULT_WEIGHTS.strength)
    with pytest.raises(ValueError):
        weights_with(DEFAULT_WEIGHTS, {"luck": 1.0})
    with pytest.raises(ValueError):
        weights_with(DEFAULT_WEIGHTS, {"similarity": -1})


def test_the_six_factors_of_a_trace():
    t = trace(s0=0.5, importance=0.7, valence=0.5)
    f = factors(t, similarity=0.8, activation=0.3, mood=Pad(0.6, 0, 0), now_us=T0 + 24 * HOUR_US)
    assert f.strength == pytest.approx(0.5 * np.exp(-24))
    assert f.similarity == 0.8
    assert f.recency == pytest.approx(0.5)  # a day after encoding
    assert f.emotional == pytest.approx(0.3)
    assert f.activation == 0.3
    assert f.importance == 0.7
    assert factors(t, similarity=0.8, activation=0, mood=Pad(-0.6, 0, 0), now_us=T0).emotional == 0.0


def _book_with(vectors: dict[str, np.ndarray], *, edges=(), scopes=None) -> tuple[TraceBook, HnswIndex]:
    book, index = TraceBook("a"), HnswIndex(8)
    seq = 0
    for tid, v in vectors.items():
        seq += 1
        scope, scope_id = (scopes or {}).get(tid, ("discussion", "d"))
        ev = TraceEncoded(
            trace_id=tid, content=f"memory {tid}", trace_type="episodic", scope=scope, scope_id=scope_id,
            source_type="user_statement", source_seqs=(seq,), importance=0.5, confidence=0.8, strength=0.5,
            stability_s=3600.0, interval_s=3600.0, source_message_ids=(f"D1:{seq}",),
        )
        book.apply(rec(ev, seq=seq, stream=scope_id if scope == "discussion" else "agent:a"))
        index.add([tid], v.reshape(1, -1))
    for src, dst, w in edges:
        seq += 1
        book.apply(rec(EdgeAdded(src=src, dst=dst, kind="temporal_sequence", weight=w), seq=seq))
    return book, index


def test_recall_scores_each_hit_by_factor_and_the_contributions_sum_to_the_score():
    book, index = _book_with({"near": unit(1, 0.1), "far": unit(0.2, 1), "mid": unit(1, 0.6)})
    result = recall(Held(book, index), RecallQuery("q", unit(1, 0), T0 + HOUR_US, Pad(), limit=3), RecallSettings())
    assert [h.trace_id for h in result.hits] == ["near", "mid", "far"]
    for h in result.hits:
        assert h.score == pytest.approx(h.contributions.total())
        assert h.contributions.similarity == pytest.approx(h.factors.similarity * DEFAULT_WEIGHTS.similarity)
        assert h.source_message_ids and h.source_seqs


def test_per_call_weights_change_the_ranking():
    book, index = _book_with({"similar": unit(1, 0), "important": unit(0.7, 0.7)})
    book.traces["important"].importance = 1.0
    book.traces["similar"].importance = 0.0
    asked = RecallQuery("q", unit(1, 0), T0, Pad(), limit=2)
    by_similarity = recall(Held(book, index), asked, RecallSettings(weights=Factors(similarity=1.0)))
    by_importance = recall(Held(book, index), asked, RecallSettings(weights=Factors(similarity=0.1, importance=1.0)))
    assert by_similarity.hits[0].trace_id == "similar"
    assert by_importance.hits[0].trace_id == "important"
    assert by_importance.weights == Factors(similarity=0.1, importance=1.0)


def test_spreading_activation_brings_in_and_lifts_associated_traces():
    vectors = {"seed": unit(1, 0), "linked": unit(0, 1), "unlinked": unit(0, 1, 0.01)}
    vectors.update({f"near{i}": unit(1, 0.3 + 0.1 * i) for i in range(10)})
    book, index = _book_with(vectors, edges=[("seed", "linked", 1.0)])
    asked = RecallQuery("q", unit(1, 0), T0, Pad(), limit=2)
    result = recall(Held(book, index), asked, RecallSettings(pool=1))
    assert result.candidates == 9  # the 8 nearest (4 × limit) and what activation reached
    assert "linked" in result.spread and "unlinked" not in result.spread
    lifted = recall(Held(book, index), asked, RecallSettings(pool=1, weights=Factors(similarity=0.1, activation=1.0)))
    top = lifted.hits[0]
    assert (top.trace_id, top.via) == ("linked", "activation") and top.factors.activation > 0


def test_recall_respects_the_discussion_scope():
    scopes = {"here": ("discussion", "d"), "there": ("discussion", "e"), "everywhere": ("agent", "a")}
    book, index = _book_with({k: unit(1, i * 0.1) for i, k in enumerate(scopes)}, scopes=scopes)
    found = {h.trace_id for h in recall(Held(book, index), RecallQuery("q", unit(1, 0), T0, Pad(), discussion="d"),
                                        RecallSettings()).hits}
    assert found == {"here", "everywhere"}
    everything = {h.trace_id for h in recall(Held(book, index), RecallQuery("q", unit(1, 0), T0, Pad()), RecallSettings()).hits}
    assert everything == set(scopes)


def test_hyde_threshold_starts_at_seven_tenths_and_is_lowered_to_three_tenths():
    assert thresholds(0.7, 0.3) == (0.7, 0.6, 0.5, 0.4, 0.3)
    assert thresholds(0.7, 0.3, adaptive=False) == (0.7,)
    s = HydeSettings.of(AgentConfig().rag.hyde)
    assert (s.initial, s.minimum, s.adaptive) == (0.7, 0.3, True)
    index = HnswIndex(8)
    index.add(["a", "b"], np.stack([unit(1, 1.2), unit(1, 3)]))  # cosines with (1,0): 0.64, 0.32
    found = adaptive_search(index, unit(1, 0), 5, None)
    assert found.threshold == 0.6 and found.tried == (0.7, 0.6) and [t for t, _ in found.hits] == ["a"]
    nothing = adaptive_search(index, unit(0, 0, 1), 5, None)
    assert nothing.hits == () and nothing.threshold == 0.3 and nothing.tried[-1] == 0.3


def test_agreeable_agents_get_two_more_results_by_default():
    assert limit_for(None, 10, 2) == 12
    assert limit_for(5, 10, 2) == 5  # an explicit limit is honoured


def test_a_second_memory_of_the_same_message_gives_its_place_to_another_message():
    from engram.events.cognitive import TraceEncoded

    book, index = TraceBook("a"), HnswIndex(8)
    for seq, (tid, message, vector) in enumerate(
            [("fact", "D1:1", unit(1, 0)), ("episode", "D1:1", unit(1, 0.05)), ("other", "D2:4", unit(1, 0.4))], 1):
        ev = TraceEncoded(trace_id=tid, content=tid, trace_type="episodic", scope="discussion", scope_id="d",
                          source_type="user_statement", source_seqs=(seq,), importance=0.5, confidence=0.8, strength=0.5,
                          stability_s=3600.0, interval_s=3600.0, source_message_ids=(message,))
        book.apply(rec(ev, seq=seq))
        index.add([tid], vector.reshape(1, -1))
    result = recall(Held(book, index), RecallQuery("q", unit(1, 0), T0, Pad(), limit=2),
                    RecallSettings(similarity="embedding", feedback=FeedbackSettings(traces=0)))  # similarity to the query alone: "fact" is the better
    assert [h.trace_id for h in result.hits] == ["fact", "other"] and result.candidates == 3

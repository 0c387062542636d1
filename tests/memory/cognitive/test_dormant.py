"""Dormant traces: what the decay sweep pruned stays findable through what it was made from, below active memory."""

from __future__ import annotations

import pytest
from tests.memory.cognitive.helpers import HOUR_US, T0, rec

from engram.cli.recall import render
from engram.config.agent import AgentConfig
from engram.events.cognitive import TraceEncoded, TracePruned
from engram.events.control import DiscussionForgotten
from engram.memory.cognitive.memory import AgentMemory
from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.retrieval import DormantSettings, RecallQuery, RecallSettings, recall

DAY_US = 24 * HOUR_US


def _encoded(tid: str, content: str, seq: int, message: str) -> TraceEncoded:
    return TraceEncoded(
        trace_id=tid, content=content, trace_type="episodic", scope="discussion", scope_id="d",
        source_type="user_statement", source_seqs=(seq,), importance=0.3, confidence=0.8, strength=0.5,
        stability_s=3600.0, interval_s=3600.0, source_message_ids=(message,),
    )


def _memory(embedder, contents: dict[str, str], pruned: dict[str, str]) -> AgentMemory:
    """A recall reader's memory (real MiniLM vectors) of `contents`; `pruned` maps trace id -> TracePruned reason,
    each pruned a day after encoding."""
    mem = AgentMemory("a", embedder.dim, dormant=True)
    recs = [rec(_encoded(tid, text, seq, f"D1:{seq}"), seq=seq) for seq, (tid, text) in enumerate(contents.items(), 1)]
    seq = len(recs)
    for tid, reason in pruned.items():
        seq += 1
        recs.append(rec(TracePruned(trace_id=tid, strength=0.04, reason=reason), seq=seq, ts_us=T0 + DAY_US))
    mem.apply_batch(recs, embedder.embed)
    return mem


def _recall(mem: AgentMemory, embedder, query: str, dormant: DormantSettings = DormantSettings(), limit: int = 5):
    settings = RecallSettings.of(AgentConfig())
    asked = RecallQuery(query, embedder.embed([query])[0], T0 + 2 * DAY_US, Pad(), limit=limit, discussion="d")
    return recall(mem, asked, RecallSettings(weights=settings.weights, feedback=settings.feedback, dormant=dormant))


EVERYDAY = {
    "work": "Ana worked late at the office again this week.",
    "dinner": "Ben cooked pasta for dinner with his sister.",
    "weather": "It rained all weekend, so everyone stayed home.",
    "football": "The kids play football in the park on Sundays.",
    "novel": "Ben is reading a novel about sailing.",
}


def test_a_question_whose_evidence_the_decay_sweep_pruned_is_still_answered_from_the_dormant_trace(embedder):
    mem = _memory(embedder, {**EVERYDAY, "clarinet": "Ana plays the clarinet in a jazz band."}, {"clarinet": "decay"})
    assert not mem.book.traces["clarinet"].active and "clarinet" not in mem.index  # pruned: not active memory
    result = _recall(mem, embedder, "Which instrument does Ana play?")
    top = result.hits[0]
    assert (top.trace_id, top.via) == ("clarinet", "dormant")
    assert top.source_message_ids == ("D1:6",)  # maps back to the message it was made from
    assert top.pruned_us == T0 + DAY_US and top.dormant_weight == DormantSettings().weight
    assert top.score == pytest.approx(top.contributions.total())
    assert result.dormant_candidates >= 1
    # Without the dormant stage the pruned memory is simply gone.
    assert "clarinet" not in {h.trace_id for h in _recall(mem, embedder, "Which instrument does Ana play?", DormantSettings(pool=0)).hits}


def test_a_dormant_trace_ranks_below_an_active_trace_of_equal_match_without_a_weight(embedder):
    same = "Ana plays the clarinet in a jazz band."
    mem = _memory(embedder, {**EVERYDAY, "old": same, "new": same}, {"old": "decay"})
    hits = _recall(mem, embedder, "Which instrument does Ana play?").hits
    ranked = [(h.trace_id, h.via) for h in hits[:2]]
    assert ranked[0][0] == "new" and ranked[0][1] != "dormant"
    assert ranked[1] == ("old", "dormant")
    # Equal match: the same text, the same cosine; the keyword match of the dormant one is on the statistics of the
    # active and dormant traces together (one more document), so it differs by a little.
    assert hits[1].cosine == pytest.approx(hits[0].cosine, abs=1e-5)
    assert hits[1].factors.similarity == pytest.approx(hits[0].factors.similarity, abs=0.05)
    assert hits[1].score < hits[0].score
    assert hits[1].dormant_weight == 1.0  # DORMANT_WEIGHT 1.0 (issue 24): no penalty on top of what it is
    assert hits[1].shown == ""  # what it says, the active trace above already shows


def test_only_traces_that_faded_are_dormant_not_restatements_or_forgotten_discussions(embedder):
    mem = _memory(embedder, {**EVERYDAY, "clarinet": "Ana plays the clarinet in a jazz band.",
                             "again": "Ana plays clarinet with her jazz band."}, {"clarinet": "decay", "again": "restates earlier x"})
    assert "clarinet" in mem.dormant_index and "again" not in mem.dormant_index  # a restatement's content lives on
    assert {h.trace_id for h in _recall(mem, embedder, "Which instrument does Ana play?").hits} >= {"clarinet"}
    assert "again" not in {h.trace_id for h in _recall(mem, embedder, "Which instrument does Ana play?").hits}
    mem.apply_batch([rec(DiscussionForgotten(discussion_id="d"), seq=99, ts_us=T0 + 2 * DAY_US)], embedder.embed)
    assert len(mem.dormant_index) == 0 and len(mem.dormant_lexical) == 0
    assert _recall(mem, embedder, "Which instrument does Ana play?").hits == ()


def test_explain_says_a_hit_came_from_a_pruned_trace_and_shows_its_source(embedder):
    from engram.api import types as t

    mem = _memory(embedder, {**EVERYDAY, "clarinet": "Ana plays the clarinet in a jazz band."}, {"clarinet": "decay"})
    r = _recall(mem, embedder, "Which instrument does Ana play?", limit=2)
    h = r.hits[0]
    hit = t.RecallHit(
        rank=h.rank, trace_id=h.trace_id, score=h.score, content=h.content, factors=h.factors.as_dict(),
        similarity_parts={"cosine": h.cosine, "lexical": h.lexical, "feedback": h.feedback},
        contributions=h.contributions.as_dict(), trace_type=h.trace_type, category=h.category, scope=h.scope,
        scope_id=h.scope_id, via=h.via, source_seqs=list(h.source_seqs), source_message_ids=list(h.source_message_ids),
        sources=[t.SourceMessage(seq=6, discussion="d", message_id="D1:6", role="user", name="Ana",
                                 content="I play the clarinet in a jazz band!", ts="2023-11-14T22:13:20Z")],
        pruned_at="2023-11-15T22:13:20Z", dormant_weight=h.dormant_weight,
    )
    result = t.RecallResponse(
        query=r.query, agent="a", discussion="d", now_us=r.now_us, candidates=r.candidates, similarity=r.similarity,
        weights=r.weights.as_dict(), focus="", feedback=t.Feedback(share=0.0),
        mood=t.Mood(valence=0.0, arousal=0.0, dominance=0.0), hyde=None, hits=[hit],
    )
    text = render(result, explain=True)
    assert "via dormant" in text
    assert "dormant: pruned by decay at 2023-11-15T22:13:20Z, found again through its source message(s)" in text
    assert f"× {DormantSettings().weight:.2f}" in text
    assert 'message D1:6' in text and "I play the clarinet in a jazz band!" in text


def test_the_trace_reader_answers_from_a_pruned_trace_through_its_source_message(tmp_path, embedder):
    """The serving path (the reader on a real DuckDB log, no Ray): a decay prune in the log moves the trace to the
    reader's dormant indexes, and recall returns it as dormant with its source message."""
    from engram.config.service import ServiceConfig
    from engram.events.envelope import NewEvent, Write
    from engram.events.messages import MessageAppended
    from engram.config.home import Home
    from engram.providers.llm.factory import make_tasks
    from engram.policies.auto_ingest import AutoIngest
    from engram.policies.base import PolicyContext
    from engram.policies.host import PolicyHost
    from engram.policies.trace_reader import TraceReader
    from engram.shard.host import ShardHost

    config = ServiceConfig()
    svc = {"tasks": make_tasks(config.llm), "embedder": embedder, "config": config}
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        ctx = PolicyContext(shard=0, home=Home(tmp_path), services=svc, read=shard.read, append=shard.append_many)
        reader = TraceReader(ctx)
        host = PolicyHost([AutoIngest(ctx), reader], read=shard.read, append=shard.append_many, head=shard.head,
                          state_dir=tmp_path / "state")
        said = ["I play the clarinet in a jazz band every Thursday.", "Work was busy, the office is moving floors.",
                "We cooked pasta with my sister on Sunday."]
        shard.append_many([Write(stream="chat", agent="ana", events=(NewEvent(
            event=MessageAppended(role="user", content=text, message_id=f"m{n}", token_estimate=12, name="Ana"),
            ts_us=T0 + n * 60_000_000, event_id=f"m{n}"),)) for n, text in enumerate(said)])
        host.run_until_caught_up()
        mem = reader.memory("ana")
        clarinet = sorted(tid for tid, t in mem.book.traces.items() if "m0" in t.source_message_ids)
        assert clarinet
        shard.append_many([Write(stream="chat", agent="ana", events=tuple(NewEvent(
            event=TracePruned(trace_id=tid, strength=0.04, reason="decay"), ts_us=T0 + DAY_US, event_id=f"prune:{tid}")
            for tid in clarinet))])
        host.run_until_caught_up()
        assert all(tid in mem.dormant_index and tid not in mem.index for tid in clarinet)
        result = reader.recall("ana", "Which instrument does Ana play?", now_us=T0 + 2 * DAY_US, discussion="chat", record=False)
        found = [h for h in result.hits if h.trace_id in clarinet]
        assert found and all(h.via == "dormant" and h.source_message_ids == ("m0",) and h.pruned_us == T0 + DAY_US
                             for h in found)
    finally:
        shard.close()


def test_an_edited_dormant_trace_is_found_by_its_new_words_and_its_old_vector_is_gone(embedder):
    import numpy as np

    from engram.events.memory_edits import MemoryEdited

    mem = _memory(embedder, {**EVERYDAY, "clarinet": "Ana plays the clarinet in a jazz band."}, {"clarinet": "decay"})
    cello = "Ana restores antique harpsichords in a workshop by the harbour."
    mem.apply_batch([rec(MemoryEdited(kind="trace", memory_id="clarinet", content=cello), seq=20,
                         ts_us=T0 + DAY_US + HOUR_US)], embedder.embed)
    assert "clarinet" in mem.dormant_index and "clarinet" not in mem.index  # still dormant, re-embedded there
    (vector,) = mem.dormant_index.vectors(["clarinet"])
    (expected,) = mem.vectors_of([(cello, mem.book.traces["clarinet"].context)], embedder.embed)
    assert np.allclose(vector, expected, atol=1e-5)
    top = _recall(mem, embedder, "Who restores harpsichords?").hits[0]
    assert (top.trace_id, top.via, top.content) == ("clarinet", "dormant", cello)

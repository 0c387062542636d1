"""Facts with validity in time (issue 24): a correction closes the older fact at the moment the conversation said the
newer one instead of losing it; recall answers what is true now, and what was true at a time when asked (`as_of`)."""

from __future__ import annotations

import pickle

from engram.config.agent import AgentConfig
from engram.events.cognitive import ConflictResolved, TraceEncoded
from engram.memory.cognitive.memory import AgentMemory
from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.retrieval import RecallQuery, RecallSettings, recall

from tests.memory.cognitive.helpers import HOUR_US, T0, Held, rec

DAY_US = 24 * HOUR_US
MOVED = T0 + 10 * DAY_US  # when the conversation said she had moved
OTHER = {
    "work": "Ben worked late at the office again this week.",
    "dinner": "Ben cooked pasta for dinner with his sister.",
    "football": "The kids play football in the park on Sundays.",
}


def _encoded(tid: str, content: str, seq: int) -> TraceEncoded:
    return TraceEncoded(trace_id=tid, content=content, trace_type="semantic", scope="discussion", scope_id="d",
                        source_type="user_statement", source_seqs=(seq,), importance=0.5, confidence=0.8, strength=0.8,
                        stability_s=90 * 86400.0, interval_s=3600.0, source_message_ids=(f"D1:{seq}",),
                        entities=("Ana", "Lisbon"))


def _memory(embedder, resolution: str = "prefer_newer") -> AgentMemory:
    mem = AgentMemory("a", embedder.dim, dormant=True)
    recs = [rec(_encoded(tid, text, seq), seq=seq, ts_us=T0 + seq) for seq, (tid, text) in enumerate(OTHER.items(), 1)]
    recs.append(rec(_encoded("lisbon", "Ana lives in Lisbon, near the river.", 10), seq=10, ts_us=T0 + HOUR_US))
    recs.append(rec(_encoded("porto", "Ana no longer lives in Lisbon: she moved to Porto.", 11), seq=11, ts_us=MOVED))
    recs.append(rec(ConflictResolved(winner="porto", loser="lisbon", resolution=resolution), seq=12, ts_us=MOVED))
    mem.apply_batch(recs, embedder.embed)
    return mem


def _ask(mem, embedder, as_of_us=None):
    settings = RecallSettings.of(AgentConfig())
    query = "Where does Ana live?"
    asked = RecallQuery(query, embedder.embed([query])[0], MOVED + DAY_US, Pad(), limit=5, discussion="d", as_of_us=as_of_us)
    memory = Held(mem.book, mem.index, mem.lexical, mem.dormant_index, mem.dormant_lexical)  # no answer link
    return recall(memory, asked, RecallSettings(weights=settings.weights, feedback=settings.feedback))


def test_a_correction_closes_the_older_fact_at_the_moment_the_conversation_said_the_newer_one(embedder):
    mem = _memory(embedder)
    old, new = mem.book.traces["lisbon"], mem.book.traces["porto"]
    assert (old.valid_from_us, old.valid_to_us, old.superseded_by) == (T0 + HOUR_US, MOVED, "porto")
    assert (new.valid_from_us, new.valid_to_us, new.superseded_by) == (MOVED, None, "")
    assert old.encoded_us == T0 + HOUR_US  # when it was learned stays beside when it stopped being true


def test_a_superseded_fact_is_answered_as_of_before_its_change_and_the_new_one_after(embedder):
    mem = _memory(embedder)
    now = [h.trace_id for h in _ask(mem, embedder).hits]
    assert now[0] == "porto" and "lisbon" not in now  # what is true now, by default
    before = _ask(mem, embedder, as_of_us=MOVED - DAY_US).hits
    assert before[0].trace_id == "lisbon" and "porto" not in [h.trace_id for h in before]
    assert (before[0].via, before[0].valid_to_us, before[0].superseded_by) == ("superseded", MOVED, "porto")
    after = [h.trace_id for h in _ask(mem, embedder, as_of_us=MOVED + HOUR_US).hits]
    assert after[0] == "porto" and "lisbon" not in after
    # Before either was said, neither was known.
    assert {"lisbon", "porto"}.isdisjoint(h.trace_id for h in _ask(mem, embedder, as_of_us=T0).hits)


def test_a_fact_kept_beside_its_correction_says_when_it_was_superseded(embedder):
    mem = _memory(embedder, resolution="keep_both")
    hits = _ask(mem, embedder).hits
    ids = [h.trace_id for h in hits]
    assert ids.index("porto") < ids.index("lisbon")
    kept = hits[ids.index("lisbon")]
    assert (kept.valid_to_us, kept.superseded_by) == (MOVED, "porto")
    assert [h.trace_id for h in _ask(mem, embedder, as_of_us=MOVED - DAY_US).hits][0] == "lisbon"


def test_validity_of_a_memory_pickled_before_it_existed_is_derived_as_the_fold_derives_it(embedder):
    mem = _memory(embedder)
    for t in mem.book.traces.values():
        for name in ("valid_from_us", "valid_to_us", "superseded_by"):
            del t.__dict__[name]
    back = pickle.loads(pickle.dumps(mem.book))
    assert (back.traces["lisbon"].valid_to_us, back.traces["lisbon"].superseded_by) == (MOVED, "porto")
    assert back.traces["porto"].valid_from_us == MOVED


def test_the_cli_says_when_a_fact_was_superseded_and_refuses_an_as_of_that_is_no_time(embedder):
    import pytest

    from engram.api import types as t
    from engram.cli.errors import UsageError
    from engram.cli.recall import parse_at, render

    h = _ask(_memory(embedder), embedder, as_of_us=MOVED - DAY_US).hits[0]
    hit = t.RecallHit(
        rank=h.rank, trace_id=h.trace_id, score=h.score, content=h.content, factors=h.factors.as_dict(),
        similarity_parts={"cosine": h.cosine, "lexical": h.lexical, "feedback": h.feedback},
        contributions=h.contributions.as_dict(), trace_type=h.trace_type, category=h.category, scope=h.scope,
        scope_id=h.scope_id, via=h.via, source_seqs=list(h.source_seqs), source_message_ids=list(h.source_message_ids),
        pruned_at="2023-11-24T22:13:20Z", valid_from="2023-11-14T23:13:20Z", valid_to="2023-11-24T22:13:20Z",
        superseded_by=h.superseded_by,
    )
    result = t.RecallResponse(
        query="Where does Ana live?", agent="a", discussion="d", now_us=MOVED, candidates=1, similarity="hybrid",
        weights={}, focus="", feedback=t.Feedback(share=0.0), mood=t.Mood(valence=0.0, arousal=0.0, dominance=0.0),
        hyde=None, hits=[hit],
    )
    text = render(result, explain=False)
    assert "via superseded" in text
    assert "superseded at 2023-11-24T22:13:20Z by porto (true from 2023-11-14T23:13:20Z)" in text
    assert "pruned by decay" not in text
    with pytest.raises(UsageError, match="--as-of 'last spring' is not an ISO-8601 time"):
        parse_at("last spring", "--as-of")


def _edited_memory(embedder, *, late: bool) -> AgentMemory:
    """Ana's "Lisbon" trace made from message D1:10, which the front end then edits (or, `late`, whose trace is
    recorded only after the edit, caused by the message from before it)."""
    from engram.events.messages import MessageEdited

    mem = AgentMemory("a", embedder.dim, dormant=True)
    # Made from the message (seq 9) before the edit; recorded after it when `late`.
    lisbon = rec(_encoded("lisbon", "Ana lives in Lisbon, near the river.", 10), seq=22 if late else 10, ts_us=T0 + HOUR_US,
                 causation=9)
    edit = rec(MessageEdited(message_id="D1:10", role="user", content="I live in Porto, near the river.",
                             token_estimate=9), seq=20, ts_us=MOVED)
    porto = rec(_encoded("porto", "Ana lives in Porto, near the river.", 20), seq=21, ts_us=MOVED, causation=20)
    mem.apply_batch([edit, lisbon, porto] if late else [lisbon, edit, porto], embedder.embed)
    return mem


def test_an_edited_message_supersedes_its_traces_at_the_edit_and_as_of_before_it_they_answer(embedder):
    for late in (False, True):
        mem = _edited_memory(embedder, late=late)
        old = mem.book.traces["lisbon"]
        assert not old.active and (old.valid_from_us, old.valid_to_us) == (T0 + HOUR_US, MOVED)
        assert old.superseded_by == "edit of message D1:10"
        assert [h.trace_id for h in _ask(mem, embedder).hits][0] == "porto"
        before = _ask(mem, embedder, as_of_us=MOVED - 1).hits
        assert before[0].trace_id == "lisbon" and before[0].via == "superseded"
        assert "porto" not in [h.trace_id for h in before]

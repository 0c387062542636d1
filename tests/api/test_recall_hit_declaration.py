"""The recall answer's hit is the core's hit as the API shows it (issue 26: an API type does not drift from its
record). Every field of either is accounted for: taken as it is, computed for the API, or the core's own."""

from __future__ import annotations

import dataclasses

from engram.api import types as t
from engram.api.cognitive import HIT_AS_IS, HIT_COMPUTED, HIT_CORE_ONLY, api_hit
from engram.memory.cognitive.retrieval import RecallHit
from engram.memory.cognitive.scoring import Factors

CORE = [f.name for f in dataclasses.fields(RecallHit)]
API = list(t.RecallHit.__struct_fields__)


def test_every_field_of_the_api_hit_is_the_cores_or_computed_from_it():
    assert sorted(set(API) - set(HIT_AS_IS) - set(HIT_COMPUTED)) == []
    assert set(HIT_AS_IS) <= set(CORE) and not set(HIT_COMPUTED) & set(HIT_AS_IS)


def test_every_field_of_the_core_hit_reaches_the_api_or_is_declared_the_cores_own():
    # (score, factors and contributions reach it rounded: computed under their own names)
    assert sorted(set(CORE) - set(HIT_AS_IS) - set(HIT_COMPUTED) - set(HIT_CORE_ONLY)) == []
    assert not set(HIT_CORE_ONLY) & set(API)


def test_an_api_hit_shows_the_core_hits_values_rounded_and_its_sources():
    core = RecallHit(
        rank=1, trace_id="t1", content="Ana plays the clarinet", score=0.1234567, factors=Factors(similarity=0.5),
        contributions=Factors(similarity=0.1234567), trace_type="episodic", category="", scope="discussion",
        scope_id="d", source_type="user_statement", source_seqs=(3,), source_message_ids=("D1:3",), entities=("Ana",),
        importance=0.5, strength=0.9, retrieval_count=0, encoded_us=0, via="dormant", cosine=0.71234567,
        context="What does Ana play?", context_message_ids=("D1:2",), pruned_us=1_700_000_000_000_000, dormant_weight=0.5,
    )
    source = t.SourceMessage(seq=3, discussion="d", message_id="D1:3", role="user", name=None, content="I play the clarinet",
                             ts="2023-11-14 22:13:20+00:00")
    hit = api_hit(core, {3: source})
    assert (hit.rank, hit.trace_id, hit.via, hit.score) == (1, "t1", "dormant", 0.123457)
    assert hit.source_seqs == [3] and hit.source_message_ids == ["D1:3"] and hit.context_message_ids == ["D1:2"]
    assert hit.similarity_parts == {"cosine": 0.712346, "lexical": 0.0, "feedback": 0.0}
    assert hit.factors["similarity"] == 0.5 and hit.contributions["similarity"] == 0.123457
    assert hit.sources == [source] and hit.pruned_at.startswith("2023-11-14") and hit.dormant_weight == 0.5

"""The recall answer's hit is declared once (issue 26): what the core's hit and the API's show as it is lives in
`engram.memory.cognitive.hit.HitShown`, which both extend; neither declares one of its fields again."""

from __future__ import annotations

import msgspec

from engram.api import types as t
from engram.api.cognitive import api_hit
from engram.memory.cognitive.hit import HitShown
from engram.memory.cognitive.retrieval import RecallHit
from engram.memory.cognitive.scoring import Factors

SHOWN = set(HitShown.__struct_fields__)


def own_fields(cls: type) -> set[str]:
    """The fields `cls` declares itself (its own annotations), not those it inherits."""
    return set(cls.__dict__.get("__annotations__", {}))


def test_the_core_hit_and_the_api_hit_both_extend_the_one_declaration():
    assert issubclass(RecallHit, HitShown) and issubclass(t.RecallHit, HitShown)
    assert SHOWN <= set(RecallHit.__struct_fields__) and SHOWN <= set(t.RecallHit.__struct_fields__)


def test_no_field_of_the_shown_hit_is_declared_a_second_time():
    assert own_fields(RecallHit) & SHOWN == set()
    assert own_fields(t.RecallHit) & SHOWN == set()
    # the API computes its own fields from the core's; none of them is a core field under the same name but retyped
    assert own_fields(t.RecallHit) & own_fields(RecallHit) == {"score", "factors", "contributions"}


def test_a_field_added_to_the_declaration_reaches_the_api_answer():
    class Wider(HitShown, kw_only=True):
        novelty: float = 0.25

    class ApiWider(Wider, t.Model, kw_only=True):
        score: float

    assert "novelty" in msgspec.json.schema(ApiWider)["$defs"]["ApiWider"]["properties"]


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
    wire = msgspec.json.decode(msgspec.json.encode(hit))
    assert wire["source_seqs"] == [3] and wire["source_message_ids"] == ["D1:3"] and wire["context_message_ids"] == ["D1:2"]
    assert hit.similarity_parts == {"cosine": 0.712346, "lexical": 0.0, "feedback": 0.0}
    assert hit.factors["similarity"] == 0.5 and hit.contributions["similarity"] == 0.123457
    assert hit.sources == [source] and hit.pruned_at.startswith("2023-11-14") and hit.dormant_weight == 0.5
    assert msgspec.convert(wire, t.RecallHit) == hit  # the answer a client decodes is the hit sent

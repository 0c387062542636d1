"""VectorMemorySearch: keywords, the 60-keyword limit, modes, and empty results that say why."""

from __future__ import annotations

import pytest
from tests.memory.discussion.conftest import AGENT, ingest
from tests.memory.discussion.engine import LocalMemory

from engram.memory.discussion import search as vsearch
from engram.memory.ingest.formats import parse_file


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    from tests.memory.discussion.engine import LocalEngine

    home = tmp_path_factory.mktemp("search") / "home"
    home.mkdir()
    with LocalEngine(home) as engine:
        conv = parse_file("engram/samples/acme-dashboard.jsonl", now_us=0)[0]
        ingest(engine, conv.discussion, conv.messages)
        memory = LocalMemory(engine, AGENT)
        yield memory, memory.open_store("acme-dashboard")


def run(memory, store, text, **kw):
    return vsearch.search(store, text, discussion="acme-dashboard", embed=memory.embed,
                          embedding_model=memory.embedding_model, **kw)


def test_keywords_are_split_on_semicolons_trimmed_and_deduplicated():
    assert vsearch.parse_keywords(" Project Stardust ;mission parameters;; Dr. Evelyn Reed;project stardust") == (
        ["Project Stardust", "mission parameters", "Dr. Evelyn Reed"], [])


def test_more_than_sixty_keywords_keep_the_first_sixty_with_a_warning():
    keywords, warnings = vsearch.parse_keywords(";".join(f"k{i}" for i in range(75)))
    assert keywords == [f"k{i}" for i in range(60)]
    assert warnings == ["75 keywords given; VectorMemorySearch uses at most 60, so the last 15 were ignored"]


def test_keyword_search_uses_or_logic_over_the_keywords(demo_store):
    memory, store = demo_store
    one = {h.memory.memory_id for h in run(memory, store, "Marco", mode="keyword", limit=10).hits}
    other = {h.memory.memory_id for h in run(memory, store, "Vercel", mode="keyword", limit=10).hits}
    both = {h.memory.memory_id for h in run(memory, store, "Marco;Vercel", mode="keyword", limit=10).hits}
    assert one and other and both == one | other


def test_each_result_traces_back_to_its_source_messages(demo_store):
    memory, store = demo_store
    hit = run(memory, store, "Priya Raman", mode="keyword", limit=1).hits[0]
    assert "Priya" in hit.memory.summary
    from engram.memory.ingest.messages import discussion_write

    conv = parse_file("engram/samples/acme-dashboard.jsonl", now_us=0)[0]
    first_five = discussion_write(AGENT, conv.discussion, conv.messages, max_message_chars=100_000).events[:5]
    assert list(hit.memory.message_ids) == [e.event.message_id for e in first_five]
    assert hit.as_dict()["first_message_id"] == hit.memory.message_ids[0] and hit.memory.first_seq < hit.memory.last_seq


def test_semantic_search_finds_meaning_without_shared_words(demo_store):
    memory, store = demo_store
    result = run(memory, store, "cloud hosting and deployment", mode="semantic", limit=3)
    assert any("Vercel" in h.memory.title for h in result.hits)
    assert not run(memory, store, "cloud hosting and deployment", mode="keyword").hits


def test_hybrid_is_the_default_and_fuses_both_rankings(demo_store):
    memory, store = demo_store
    result = run(memory, store, "Supabase auth;deadline")
    assert vsearch.DEFAULT_MODE == "hybrid" and result.mode == "hybrid" and len(result.hits) == 5
    assert all(h.keyword_rank or h.semantic_rank for h in result.hits)
    assert result.hits[0].keyword_rank is not None and result.hits[0].semantic_rank is not None


def test_limit_caps_the_results(demo_store):
    memory, store = demo_store
    assert len(run(memory, store, "Supabase", limit=2).hits) == 2


def test_no_match_says_so_in_the_wilmer_words(demo_store):
    memory, store = demo_store
    result = run(memory, store, "quantum chromodynamics", mode="keyword")
    assert result.hits == [] and result.output() == vsearch.NO_MATCH


def test_a_discussion_without_memories_says_there_are_none_yet():
    result = vsearch.search(None, "anything", discussion="new-chat")
    assert result.hits == [] and "No memories have been stored for discussion 'new-chat' yet" in result.output()


def test_an_unknown_mode_is_an_error_naming_the_closest():
    with pytest.raises(vsearch.SearchError, match="did you mean 'hybrid'"):
        vsearch.search(None, "x", discussion="d", mode="hybird")


def test_semantic_search_falls_back_to_keywords_when_the_embedder_model_differs(demo_store):
    memory, store = demo_store
    result = vsearch.search(store, "Vercel", discussion="d", mode="semantic", embed=memory.embed, embedding_model="other-model")
    assert result.mode == "keyword" and "fell back to keyword search" in result.warnings[0]


def test_keyword_search_finds_a_compound_however_the_keywords_write_it():
    """Issue 12, finding 5, for the discussion memory: Snowball stems and compounds in VectorMemorySearch."""
    import numpy as np

    from engram.memory.discussion.vectors import VectorMemoryRow, VectorStore

    def row(mid: str, summary: str) -> VectorMemoryRow:
        return VectorMemoryRow(
            memory_id=mid, generation=1, title=summary[:20], summary=summary, entities=(), key_phrases=(), topics=(),
            sentiment=None, first_seq=1, last_seq=1, message_ids=(mid,), token_count=5, first_ts_us=0, last_ts_us=0,
            created_seq=1, created_ts_us=0, mode="vector", trigger="test", llm_provider="offline", llm_model="m",
            workflow=None, embedding_model="none", vector=np.zeros(4, dtype=np.float32))

    store = VectorStore([row("m1", "Dancing helps Jon de-stress after work."), row("m2", "Gina opened a store.")], {}, None)
    for keywords in ("destress", "de-stress;relaxing", "de stress"):
        hits = vsearch.search(store, keywords, discussion="d", mode="keyword").hits
        assert [h.memory.memory_id for h in hits] == ["m1"], keywords

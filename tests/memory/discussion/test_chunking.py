"""The memory generation triggering rules of the WilmerAI guide, pinned one by one."""

from __future__ import annotations

from engram.config import defaults as d
from engram.config.discussion import DiscussionSettings
from engram.memory.discussion.chunking import Msg, Thresholds, memory_check, plan_chunks


def msgs(*tokens: int, start: int = 1) -> list[Msg]:
    return [Msg(seq=start + i, message_id=f"m{start + i}", role="user", content="x", tokens=t, ts_us=i)
            for i, t in enumerate(tokens)]


def seqs(chunks) -> list[list[int]]:
    return [[m.seq for m in c.messages] for c in chunks]


def test_the_guide_defaults_are_the_settings_defaults():
    s = DiscussionSettings()
    assert (s.chunk_estimated_token_size, s.max_messages_between_chunks, s.lookback_start_turn) == (1000, 5, 3)
    assert (s.vector_memory_chunk_estimated_token_size, s.vector_memory_max_messages_between_chunks,
            s.vector_memory_look_back_turns) == (1000, 5, 3)
    assert s.max_response_size_in_tokens == 400 and s.vector_memory_max_response_size_in_tokens == 1024
    assert s.use_vector_for_quality_memory is True
    assert (d.MIN_MEMORIES_PER_SUMMARY, d.LOOP_IF_MEMORIES_EXCEED) == (3, 3)
    assert d.CHUNK_DELIMITER == "--ChunkBreak--" and d.VECTOR_SEARCH_MAX_KEYWORDS == 60 and d.VECTOR_SEARCH_LIMIT == 5
    assert d.FIRST_MEMORY_CHECK_MESSAGES == 3


def test_token_threshold_fires_when_new_messages_reach_it_exactly():
    th = Thresholds(tokens=100, messages=50, lookback=0)
    assert seqs(plan_chunks(msgs(40, 59), th, standard=True)) == []
    chunks = plan_chunks(msgs(40, 60), th, standard=True)
    assert seqs(chunks) == [[1, 2]] and chunks[0].trigger == "tokens"


def test_message_threshold_fires_at_max_messages_between_chunks():
    th = Thresholds(tokens=1000, messages=5, lookback=0)
    assert seqs(plan_chunks(msgs(*[10] * 4), th, standard=True)) == []
    chunks = plan_chunks(msgs(*[10] * 5), th, standard=True)
    assert seqs(chunks) == [[1, 2, 3, 4, 5]] and chunks[0].trigger == "messages"


def test_whichever_threshold_is_reached_first_closes_the_chunk():
    th = Thresholds(tokens=100, messages=5, lookback=0)
    # The guide's example: ~1000 tokens or 20 messages, whichever first (scaled down).
    assert seqs(plan_chunks(msgs(60, 60, 1, 1, 1, 1), th, standard=True)) == [[1, 2]]
    assert seqs(plan_chunks(msgs(1, 1, 1, 1, 1, 60), th, standard=True)) == [[1, 2, 3, 4, 5]]
    both = plan_chunks(msgs(20, 20, 20, 20, 20), th, standard=True)
    assert both[0].trigger == "both"


def test_consolidation_mode_uses_only_the_token_threshold():
    th = Thresholds(tokens=100, messages=5, lookback=0)
    assert plan_chunks(msgs(*[10] * 9), th, standard=False) == ()
    assert seqs(plan_chunks(msgs(*[10] * 12), th, standard=False)) == [list(range(1, 11))]


def test_the_most_recent_lookback_messages_are_never_included():
    th = Thresholds(tokens=1000, messages=5, lookback=3)
    assert plan_chunks(msgs(*[10] * 7), th, standard=True) == ()  # only 4 eligible
    assert seqs(plan_chunks(msgs(*[10] * 8), th, standard=True)) == [[1, 2, 3, 4, 5]]
    # Even a huge message stays out while it is among the last three.
    assert plan_chunks(msgs(10, 5000, 10, 10), Thresholds(100, 50, 3), standard=True) == ()


def test_a_chunk_never_splits_a_message():
    th = Thresholds(tokens=100, messages=50, lookback=0)
    chunks = plan_chunks(msgs(30, 500, 30, 80), th, standard=True)
    assert seqs(chunks) == [[1, 2], [3, 4]]
    assert [c.tokens for c in chunks] == [530, 110]


def test_several_chunks_due_at_once_are_cut_in_order_and_the_rest_waits():
    th = Thresholds(tokens=1000, messages=2, lookback=1)
    chunks = plan_chunks(msgs(*[10] * 8), th, standard=True)
    assert seqs(chunks) == [[1, 2], [3, 4], [5, 6]]  # 7 waits for a partner, 8 is in the lookback


def test_checking_after_every_message_or_once_gives_the_same_chunks():
    th = Thresholds(tokens=45, messages=4, lookback=2)
    stream = msgs(10, 30, 5, 5, 40, 3, 3, 3, 3, 60, 1, 2, 9, 9)
    at_once = seqs(plan_chunks(stream, th, standard=True))
    one_by_one, pending = [], []
    for m in stream:
        pending.append(m)
        done = plan_chunks(pending, th, standard=True)
        one_by_one += seqs(done)
        if done:
            pending = [p for p in pending if p.seq > done[-1].last_seq]
    assert one_by_one == at_once and at_once


def test_no_store_and_fewer_than_three_messages_is_no_check_at_all():
    th = Thresholds(tokens=1, messages=1, lookback=0)
    check = memory_check(store_exists=False, message_count=2, pending=msgs(500, 500), th=th)
    assert not check.ran and not check.create_store and check.chunks == ()


def test_the_first_check_creates_the_store_in_consolidation_mode():
    th = Thresholds(tokens=100, messages=1, lookback=0)
    check = memory_check(store_exists=False, message_count=3, pending=msgs(10, 10, 10), th=th)
    assert check.ran and check.create_store and check.mode == "consolidation"
    assert check.chunks == ()  # the message threshold (1) does not apply yet
    after = memory_check(store_exists=True, message_count=4, pending=msgs(10, 10, 10, 10), th=th)
    assert after.mode == "standard" and not after.create_store and len(after.chunks) == 4

"""Which messages of a resent chat history are new (the proxy's append-once rule), as pure functions."""

from __future__ import annotations

from engram.memory.ingest.history import chain_ids, message_key, new_positions


def keys(*messages: tuple[str, str]) -> list[str]:
    return [message_key(role, text) for role, text in messages]


U1, A1, U2, A2, U3 = ("user", "hi"), ("assistant", "hello"), ("user", "plan a trip"), ("assistant", "where?"), ("user", "Lisbon")


def test_a_history_resent_whole_adds_only_its_new_message():
    assert new_positions(keys(U1, A1, U2, A2), keys(U1, A1, U2, A2, U3)) == [4]


def test_a_history_cut_at_the_front_adds_only_what_follows_the_log():
    assert new_positions(keys(U1, A1, U2, A2), keys(U2, A2, U3)) == [2]


def test_a_regenerate_without_the_last_reply_adds_nothing():
    assert new_positions(keys(U1, A1, U2, A2), keys(U1, A1, U2)) == []


def test_an_edited_earlier_message_is_new_and_nothing_else_is():
    edited = ("user", "plan a trip in June")
    assert new_positions(keys(U1, A1, U2, A2), keys(U1, A1, edited, A2, U3)) == [2, 4]


def test_the_same_words_said_again_after_a_cut_are_a_new_message():
    ok, reply = ("user", "ok"), ("assistant", "fine")
    log = keys(U1, ok, reply, ok, A2)
    assert new_positions(log, keys(ok, A2, ok)) == [2]


def test_the_tag_and_surrounding_space_do_not_change_what_a_message_is():
    assert message_key("user", " [DiscussionId]trip[/DiscussionId] hi ") == message_key("user", "hi")
    assert message_key("user", "hi") != message_key("assistant", "hi")


def test_an_empty_log_takes_every_message_and_a_retry_gets_the_same_ids():
    assert new_positions([], keys(U1, A1)) == [0, 1]
    assert chain_ids("trip", keys(U1, A1)) == chain_ids("trip", keys(U1, A1))
    assert chain_ids("trip", keys(U1, A1))[1] != chain_ids("trip", keys(U2, A1))[1]  # the history up to it counts

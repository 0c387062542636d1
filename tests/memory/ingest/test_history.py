"""Which messages of a resent chat history are new (the proxy's append-once rule), as pure functions."""

from __future__ import annotations

from engram.memory.ingest.history import Changes, chain_ids, changes, message_key, new_positions


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


def change(log, incoming) -> Changes:
    return changes(keys(*log), keys(*incoming), [r for r, _ in log], [r for r, _ in incoming])


def test_an_edited_earlier_message_is_an_edit_of_the_logged_one_and_only_the_new_turn_is_appended():
    edited = ("user", "plan a trip in June")
    assert change([U1, A1, U2, A2], [U1, A1, edited, A2, U3]) == Changes(new=[4], edited=[(2, 2)], removed=[])


def test_a_deleted_earlier_message_is_removed():
    assert change([U1, A1, U2, A2], [U1, A1, A2, U3]) == Changes(new=[3], edited=[], removed=[2])


def test_a_regenerate_removes_the_dropped_reply_and_a_swiped_reply_edits_it():
    assert change([U1, A1, U2, A2], [U1, A1, U2]) == Changes(new=[], edited=[], removed=[3])
    swiped = ("assistant", "where to, then?")
    assert change([U1, A1, U2, A2], [U1, A1, U2, swiped, U3]) == Changes(new=[4], edited=[(3, 3)], removed=[])


def test_a_cut_history_and_a_client_that_resends_only_user_turns_remove_nothing():
    assert change([U1, A1, U2, A2], [U2, A2, U3]) == Changes(new=[2])
    assert change([U1, A1, U2, A2], [U1, U2, U3]) == Changes(new=[2], edited=[], removed=[])


def test_the_first_message_edited_is_an_edit_and_not_a_cut():
    first = ("user", "hello there")
    assert change([U1, A1, U2, A2], [first, A1, U2, A2, U3]) == Changes(new=[4], edited=[(0, 0)], removed=[])
    # Not where a logged message of its role stood: a new message, and what precedes the alignment a cut.
    assert change([U1, A1, U2, A2], [first, U2, A2, U3]) == Changes(new=[0, 3], edited=[], removed=[])

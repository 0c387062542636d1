"""The conversation as it holds now (`engram.events.messages.conversation`): edits applied, removals left out, and a
removed message brought back by an edit (a front end's swipe back to a reply a regenerate dropped)."""

from __future__ import annotations

from engram.events.envelope import Recorded
from engram.events.messages import MessageAppended, MessageEdited, MessageRemoved, conversation


def _rec(seq: int, event) -> Recorded:
    return Recorded(seq=seq, stream="d", stream_version=seq, agent="a", ts_us=seq, event=event)


def _said(records) -> list[tuple[str, str]]:
    return [(r.event.message_id, r.event.content) for r in conversation(records)]


def _msg(seq: int, mid: str, role: str, text: str) -> Recorded:
    return _rec(seq, MessageAppended(role=role, content=text, message_id=mid, token_estimate=1))


def test_a_removed_reply_brought_back_by_an_edit_is_at_its_own_place_again_and_can_be_removed_again():
    log = [_msg(1, "u1", "user", "What should I bake?"), _msg(2, "a1", "assistant", "A fig tart."),
           _rec(3, MessageRemoved(message_id="a1")), _msg(4, "a2", "assistant", "A lemon cake.")]
    assert _said(log) == [("u1", "What should I bake?"), ("a2", "A lemon cake.")]
    log += [_rec(5, MessageEdited(message_id="a1", role="assistant", content="A fig tart.", token_estimate=1)),
            _rec(6, MessageRemoved(message_id="a2"))]
    assert _said(log) == [("u1", "What should I bake?"), ("a1", "A fig tart.")]
    log += [_rec(7, MessageRemoved(message_id="a1"))]
    assert _said(log) == [("u1", "What should I bake?")]

"""Which messages of a resent chat history are new: the OpenAI-compatible proxy's "append once" rule.

A chat front-end (SillyTavern, Open WebUI, any OpenAI client) sends the whole history on every turn,
often cut to its context window, sometimes with an earlier message edited, sometimes without the last
reply (a "regenerate"). Only what the log does not hold yet may be appended, and nothing twice.

Messages are compared by what they say: (role, text without the DiscussionId tag, whitespace-trimmed).
The incoming history is aligned with the tail of the discussion's log as two sequences (the longest
matching blocks, in order, `difflib.SequenceMatcher` on the keys); incoming messages outside the
alignment are new, in their order. So:

- history + a new message      -> the new message;
- the history cut at the front -> only what follows the log's tail;
- a regenerate (last reply dropped, nothing new) -> nothing;
- "ok" said again after a cut   -> the new "ok" (position, not only content, decides).

What the front end changed is found the same way (`changes`): between two aligned blocks, and after the last one,
a logged message the incoming history skips was changed or removed by the front end (SillyTavern's edit, swipe and
delete, Open WebUI's edit). Paired in order with an incoming message of the same role in the same gap, it was
edited (the incoming text replaces it); unpaired, it was removed. So:

- an edited earlier message     -> an edit of the logged message (nothing new is appended for it);
- a deleted earlier message     -> its removal;
- a regenerate or swipe         -> the dropped reply removed (the new reply is appended), or, when the next turn
                                   brings the swiped reply, the logged reply edited to it (the proxy brings back
                                   instead a reply that was removed before and is swiped back to: its id is the
                                   chain's, `engram.api.completions`).

Before the first aligned block, incoming messages stand where the logged ones just before it did (the first message
edited); other logged messages there are the history's cut, never removed; a role the incoming history
holds none of is never removed (a client that resends only the user's turns drops no reply), and without any
aligned block nothing is changed.

Only the log's last `window(len(incoming))` messages take part: an incoming history cannot match more
log messages than it has, plus the replies a front-end dropped. Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Sequence

from engram.kernel.ids import strip_discussion_tags

# How far back in the log an incoming history is looked for: its own length, twice (dropped and
# regenerated replies), plus a margin.
WINDOW_FACTOR = 2
WINDOW_MARGIN = 16


def message_key(role: str, content: str) -> str:
    """What identifies a message of a chat history: its role and its text (tags stripped, trimmed)."""
    text = strip_discussion_tags(content or "")
    return hashlib.blake2b(f"{role}\x1f{text}".encode(), digest_size=12).hexdigest()


def window(incoming: int) -> int:
    return WINDOW_FACTOR * incoming + WINDOW_MARGIN


@dataclass(frozen=True)
class Changes:
    """What a resent history changes in the log: positions in `incoming` to append, and positions in `logged`."""

    new: list[int] = field(default_factory=list)  # incoming messages the log does not hold, in order
    edited: list[tuple[int, int]] = field(default_factory=list)  # (logged, incoming): the logged one now says this
    removed: list[int] = field(default_factory=list)  # logged messages the front end no longer holds


def changes(logged: Sequence[str], incoming: Sequence[str], logged_roles: Sequence[str] = (),
            incoming_roles: Sequence[str] = ()) -> Changes:
    """What `incoming` (message keys, oldest first) changes in `logged` (the discussion's message keys as its
    conversation holds them now, oldest first). Without roles (`logged_roles`, `incoming_roles`, one per key) no
    edit or removal is found: only the new messages."""
    if not incoming:
        return Changes()
    offset = max(0, len(logged) - window(len(incoming)))
    tail = list(logged[offset:])
    if not tail:
        return Changes(new=list(range(len(incoming))))
    # The common case first: the history resent whole or cut, plus new messages at its end.
    for start in range(len(tail)):
        overlap = len(tail) - start
        if overlap <= len(incoming) and list(incoming[:overlap]) == tail[start:]:
            return Changes(new=list(range(overlap, len(incoming))))
    blocks = [b for b in SequenceMatcher(None, tail, list(incoming), autojunk=False).get_matching_blocks() if b.size]
    matched = {i for b in blocks for i in range(b.b, b.b + b.size)}
    new = [i for i in range(len(incoming)) if i not in matched]
    if not blocks or not logged_roles or not incoming_roles:
        return Changes(new=new)
    present = set(incoming_roles)
    edited: list[tuple[int, int]] = []
    removed: list[int] = []
    paired: set[int] = set()
    # Before the first aligned block: incoming messages there stand, from the block back, where the logged ones did
    # (a history's first message edited); logged ones without a counterpart are the history's cut, never removed.
    first = blocks[0]
    for back in range(1, min(first.a, first.b) + 1):
        i, j = first.a - back, first.b - back
        if logged_roles[offset + i] != incoming_roles[j]:
            break
        edited.append((offset + i, j))
        paired.add(j)
    edited.reverse()
    # The gaps after each aligned block: logged [a.a+a.size, next.a) against incoming [a.b+a.size, next.b).
    for here, after in zip(blocks, blocks[1:] + [None]):
        log_gap = range(here.a + here.size, after.a if after else len(tail))
        in_gap = list(range(here.b + here.size, after.b if after else len(incoming)))
        start = 0
        for i in log_gap:
            role = logged_roles[offset + i]
            found = next((k for k in range(start, len(in_gap)) if incoming_roles[in_gap[k]] == role), None)
            if found is not None:
                edited.append((offset + i, in_gap[found]))
                paired.add(in_gap[found])
                start = found + 1
            elif role in present:
                removed.append(offset + i)
    return Changes(new=[i for i in new if i not in paired], edited=edited, removed=removed)


def new_positions(logged: Sequence[str], incoming: Sequence[str]) -> list[int]:
    """Positions in `incoming` (message keys, oldest first) of the messages `logged` (the discussion's
    message keys, oldest first) does not hold, in order (`changes` without roles)."""
    return changes(logged, incoming).new


def chain_ids(discussion: str, keys: Sequence[str]) -> list[str]:
    """A message id per incoming message, from the discussion and the history up to and including it: the same
    request sent twice (a client's retry) yields the same ids, which the log recognises as duplicates."""
    out = []
    digest = hashlib.blake2b(discussion.encode(), digest_size=16)
    for key in keys:
        digest.update(key.encode())
        out.append(f"oai-{digest.copy().hexdigest()[:24]}")
    return out

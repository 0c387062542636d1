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
- an edited earlier message     -> the edited text (it is something the log never held);
- "ok" said again after a cut   -> the new "ok" (position, not only content, decides).

Only the log's last `window(len(incoming))` messages take part: an incoming history cannot match more
log messages than it has, plus the replies a front-end dropped. Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
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


def new_positions(logged: Sequence[str], incoming: Sequence[str]) -> list[int]:
    """Positions in `incoming` (message keys, oldest first) of the messages `logged` (the discussion's
    message keys, oldest first) does not hold, in order."""
    if not incoming:
        return []
    tail = list(logged[-window(len(incoming)):])
    if not tail:
        return list(range(len(incoming)))
    # The common case first: the history resent whole or cut, plus new messages at its end.
    for start in range(len(tail)):
        overlap = len(tail) - start
        if overlap <= len(incoming) and list(incoming[:overlap]) == tail[start:]:
            return list(range(overlap, len(incoming)))
    matched: set[int] = set()
    for block in SequenceMatcher(None, tail, list(incoming), autojunk=False).get_matching_blocks():
        matched.update(range(block.b, block.b + block.size))
    return [i for i in range(len(incoming)) if i not in matched]


def chain_ids(discussion: str, keys: Sequence[str]) -> list[str]:
    """A message id per incoming message, from the discussion and the history up to and including it: the same
    request sent twice (a client's retry) yields the same ids, which the log recognises as duplicates."""
    out = []
    digest = hashlib.blake2b(discussion.encode(), digest_size=16)
    for key in keys:
        digest.update(key.encode())
        out.append(f"oai-{digest.copy().hexdigest()[:24]}")
    return out

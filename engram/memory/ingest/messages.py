"""Preparing incoming messages for the log: tags stripped, empties dropped, sizes checked, ids made.

Every path into the log (ingest files, chat, the Python API, workflows) goes through here,
so a message is treated the same whichever way it arrives.
"""

from __future__ import annotations

import hashlib

import msgspec

from engram.events.envelope import NewEvent, Write
from engram.events.messages import MessageAppended, ROLES
from engram.events.validation import InvalidEvent, check_ts
from engram.kernel.ids import strip_discussion_tags, validate_agent, validate_discussion
from engram.kernel.tokens import estimate_tokens



class MessageRejected(ValueError):
    """A message that cannot be appended as given; the text names the message and why."""


# Bounds of what a message may carry besides its content (whose bound is limits.maxMessageChars).
MAX_NAME_CHARS = 256
MAX_MESSAGE_ID_CHARS = 256
MAX_METADATA_CHARS = 16_384  # all keys and values together


class IncomingMessage(msgspec.Struct, frozen=True, kw_only=True):
    role: str
    content: str
    ts_us: int
    name: str | None = None
    message_id: str | None = None
    metadata: dict[str, str] = {}
    # False when the source gave no time and `ts_us` is the arrival time: then the time is not part of
    # the message's identity (re-ingesting the same file later must find the same messages).
    ts_given: bool = True


def derived_message_id(discussion: str, role: str, name: str | None, content: str, ts_us: int | None, occurrence: int) -> str:
    """A stable id for a message that came without one, from what it is rather than where it is.

    The message's discussion, role, speaker, content and, when the source dated it, its time; plus
    `occurrence`, how many identical messages (same role, speaker, content and time) came before it in
    the same write. So re-ingesting a file with a line prepended, removed or edited adds only what is
    new, while "ok", "ok" said twice are two messages (occurrences 0 and 1), and the same words at two
    dated moments are two messages too.
    """
    key = "\x1f".join([discussion, role, name or "", content, "" if ts_us is None else str(ts_us), str(occurrence)])
    return f"c-{hashlib.sha256(key.encode()).hexdigest()[:24]}"


def check_message(msg: IncomingMessage, label: str) -> None:
    """Everything about a message but its content's length: role, types, sizes, time, valid Unicode."""
    if not isinstance(msg.role, str) or msg.role not in ROLES:
        raise MessageRejected(f"{label}: role {msg.role!r:.40} is not one of {', '.join(sorted(ROLES))}")
    if not isinstance(msg.content, str):
        raise MessageRejected(f"{label}: content must be text, got {type(msg.content).__name__}")
    if msg.name is not None and (not isinstance(msg.name, str) or len(msg.name) > MAX_NAME_CHARS):
        raise MessageRejected(f"{label}: name must be text of at most {MAX_NAME_CHARS} characters")
    if msg.message_id is not None and (not isinstance(msg.message_id, str) or len(msg.message_id) > MAX_MESSAGE_ID_CHARS):
        raise MessageRejected(f"{label}: message id must be text of at most {MAX_MESSAGE_ID_CHARS} characters")
    if not isinstance(msg.metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in msg.metadata.items()):
        raise MessageRejected(f"{label}: metadata must map text to text")
    size = sum(len(k) + len(v) for k, v in msg.metadata.items())
    if size > MAX_METADATA_CHARS:
        raise MessageRejected(f"{label}: metadata of {size} characters, over the limit of {MAX_METADATA_CHARS}")
    try:
        check_ts(msg.ts_us)
    except InvalidEvent as exc:
        raise MessageRejected(f"{label}: {exc}") from None
    for text in (msg.content, msg.name or "", msg.message_id or "", *msg.metadata, *msg.metadata.values()):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise MessageRejected(f"{label}: text that is not valid Unicode (a lone surrogate)") from None


def discussion_write(
    agent: str,
    discussion: str,
    messages: list[IncomingMessage],
    *,
    max_message_chars: int,
    where: str = "",
    first_index: int = 0,
) -> Write | None:
    """One all-or-nothing Write of `messages` for `discussion` (None if nothing is left to append)."""
    validate_agent(agent)
    validate_discussion(discussion)
    prefix = f"{where}: " if where else ""
    items = []
    seen: dict[tuple[object, ...], int] = {}  # identity without an id -> occurrences so far
    given: dict[str, tuple[int, str, str]] = {}  # a client's message id -> (index, role, content) of its first use
    for offset, msg in enumerate(messages):
        index = first_index + offset
        label = f"{prefix}message {index + 1}" + (f" ({msg.message_id:.60})" if msg.message_id else "")
        check_message(msg, label)
        content = strip_discussion_tags(msg.content)
        if not content:
            continue  # only a tag, or empty: nothing to remember
        if len(content) > max_message_chars:
            raise MessageRejected(
                f"{label}: {len(content)} characters, over the limit of {max_message_chars} (limits.maxMessageChars)"
            )
        message_id = msg.message_id
        if message_id:
            first = given.setdefault(message_id, (index, msg.role, content))
            if first[1:] != (msg.role, content):  # the log would refuse it too (409), after the settings were synced
                raise MessageRejected(f"{label}: message id {message_id!r} is message {first[0] + 1}'s too, with "
                                      "other words: a message id names one message")
        else:
            identity = (msg.role, msg.name, content, msg.ts_us if msg.ts_given else None)
            occurrence = seen.get(identity, 0)
            seen[identity] = occurrence + 1
            message_id = derived_message_id(discussion, msg.role, msg.name, content, identity[3], occurrence)
        event = MessageAppended(
            role=msg.role,
            content=content,
            message_id=message_id,
            token_estimate=estimate_tokens(content),
            name=msg.name,
            metadata=msg.metadata,
        )
        items.append(NewEvent(event=event, ts_us=msg.ts_us, event_id=f"msg:{message_id}"))
    if not items:
        return None
    return Write(stream=discussion, agent=agent, events=tuple(items))

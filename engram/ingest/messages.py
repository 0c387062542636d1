"""Preparing incoming messages for the log: tags stripped, empties dropped, sizes checked, ids made.

Every path into the log (ingest files, chat, the Python API, workflows) goes through here,
so a message is treated the same whichever way it arrives.
"""

from __future__ import annotations

import hashlib

import msgspec

from engram.events.envelope import NewEvent, Write
from engram.events.messages import MessageAppended
from engram.ids import strip_discussion_tags, validate_agent, validate_discussion
from engram.tokens import estimate_tokens

ROLES = frozenset({"user", "assistant", "system", "tool"})


class MessageRejected(ValueError):
    """A message that cannot be appended as given; the text names the message and why."""


class IncomingMessage(msgspec.Struct, frozen=True, kw_only=True):
    role: str
    content: str
    ts_us: int
    name: str | None = None
    message_id: str | None = None
    metadata: dict[str, str] = {}


def derived_message_id(discussion: str, index: int, role: str, content: str) -> str:
    """A stable id for a message that came without one: re-ingesting the same history is a no-op."""
    digest = hashlib.sha256(f"{discussion}\x1f{index}\x1f{role}\x1f{content}".encode()).hexdigest()
    return f"h{index}-{digest[:16]}"


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
    for offset, msg in enumerate(messages):
        index = first_index + offset
        label = f"{prefix}message {index + 1}" + (f" ({msg.message_id})" if msg.message_id else "")
        if msg.role not in ROLES:
            raise MessageRejected(f"{label}: role {msg.role!r} is not one of {', '.join(sorted(ROLES))}")
        content = strip_discussion_tags(msg.content)
        if not content:
            continue  # only a tag, or empty: nothing to remember
        if len(content) > max_message_chars:
            raise MessageRejected(
                f"{label}: {len(content)} characters, over the limit of {max_message_chars} (limits.maxMessageChars)"
            )
        message_id = msg.message_id or derived_message_id(discussion, index, msg.role, content)
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

"""Discussion and agent ids: validated before they touch a path, and the [DiscussionId] tag."""

from __future__ import annotations

import re

MAX_ID_LENGTH = 128
_ID_CHARS = re.compile(r"^[A-Za-z0-9_.\-]+$")
_TAG = re.compile(r"\[DiscussionId\](.*?)\[/DiscussionId\]", re.DOTALL)

DEFAULT_AGENT = "default"


class InvalidIdError(ValueError):
    """An id that would be unsafe as a file name or stream name."""


def validate_id(value: object, kind: str = "discussion id") -> str:
    """Return `value` if it is a safe id, else raise InvalidIdError saying why.

    Ids become file names (`<id>_memories.jsonl`), so the rules are strict: 1–128 characters
    from letters, digits, `_`, `-` and `.`; no path separator, no `..`, no control character,
    and not starting with a dot.
    """
    if not isinstance(value, str):
        raise InvalidIdError(f"{kind} must be a string, got {type(value).__name__}")
    shown = value if len(value) <= 40 else value[:40] + "…"
    if not value:
        raise InvalidIdError(f"{kind} is empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdError(f"{kind} {shown!r} is {len(value)} characters long; the limit is {MAX_ID_LENGTH}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise InvalidIdError(f"{kind} {shown!r} contains a control character")
    if "/" in value or "\\" in value:
        raise InvalidIdError(f"{kind} {shown!r} contains a path separator")
    if ".." in value:
        raise InvalidIdError(f"{kind} {shown!r} contains '..'")
    if value.startswith("."):
        raise InvalidIdError(f"{kind} {shown!r} starts with a dot")
    if not _ID_CHARS.match(value):
        bad = sorted({c for c in value if not re.match(r"[A-Za-z0-9_.\-]", c)})
        raise InvalidIdError(
            f"{kind} {shown!r} contains {''.join(bad)!r}; allowed are letters, digits, '_', '-' and '.'"
        )
    return value


def validate_agent(value: object) -> str:
    return validate_id(value, "agent id")


def validate_discussion(value: object) -> str:
    return validate_id(value, "discussion id")


def find_discussion_id(texts: "list[str] | tuple[str, ...]") -> str | None:
    """The id of the first `[DiscussionId]…[/DiscussionId]` tag in `texts`, validated; None if absent."""
    for text in texts:
        match = _TAG.search(text or "")
        if match:
            return validate_discussion(match.group(1).strip())
    return None


def strip_discussion_tags(text: str) -> str:
    """`text` without any DiscussionId tag (the tag never reaches an LLM or a hash)."""
    return _TAG.sub("", text).strip()


def agent_stream(agent: str) -> str:
    return f"agent:{validate_agent(agent)}"

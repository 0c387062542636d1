"""JSON with comments, as the WilmerAI guide writes its settings file (`//` and `/* */`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable


class JsoncError(ValueError):
    def __init__(self, source: str, line: int, column: int, reason: str):
        super().__init__(f"{source}:{line}:{column}: {reason}")
        self.source, self.line, self.column, self.reason = source, line, column, reason


def strip_comments(text: str) -> str:
    """`text` with comments replaced by spaces (newlines kept, so positions stay right)."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end == -1 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end == -1:
                line = text.count("\n", 0, i) + 1
                raise JsoncError("<text>", line, i - text.rfind("\n", 0, i), "unterminated /* comment")
            chunk = text[i : end + 2]
            out.append("".join(ch if ch == "\n" else " " for ch in chunk))
            i = end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def loads(text: str, source: str = "<text>"):
    """Parse JSON that may contain `//` and `/* */` comments; errors name line and column."""
    try:
        cleaned = strip_comments(text)
    except JsoncError as exc:
        raise JsoncError(source, exc.line, exc.column, exc.reason) from None
    try:
        return json.loads(cleaned, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise JsoncError(source, exc.lineno, exc.colno, exc.msg) from None
    except _NotJson as exc:
        at = cleaned.find(exc.args[0])
        line = cleaned.count("\n", 0, at) + 1
        raise JsoncError(source, line, at - cleaned.rfind("\n", 0, at), f"{exc.args[0]} is not a JSON number") from None
    except RecursionError:
        raise JsoncError(source, 1, 1, "nested too deeply") from None


def load(path: Path, error: Callable[[str], Exception]) -> Any:
    """The JSON-with-comments file at `path`; every problem raised as `error(message)`, the message naming the file
    (and the line and column of a syntax error)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path}: byte {exc.start}: not UTF-8 text") from None
    try:
        return loads(text, str(path))
    except JsoncError as exc:
        raise error(str(exc)) from None


class _NotJson(ValueError):
    pass


def _no_constant(name: str):
    raise _NotJson(name)  # NaN, Infinity, -Infinity: Python's json takes them, JSON does not

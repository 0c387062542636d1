"""Tolerant JSON from model answers: a fenced block, the whole answer, or its outermost object/array."""

from __future__ import annotations

import json
import re

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class AnswerNotJson(ValueError):
    """The answer holds no parseable JSON value."""


def _outermost(text: str, open_ch: str, close_ch: str) -> str | None:
    """The first balanced `open_ch … close_ch` span of `text`, string literals respected."""
    start = text.find(open_ch)
    while start != -1:
        depth, in_string, escaped = 0, False, False
        for pos in range(start, len(text)):
            ch = text[pos]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
                continue
            if ch == '"':
                in_string = True
            elif ch == open_ch:
                depth += 1
            elif ch == close_ch:
                depth -= 1
                if depth == 0:
                    return text[start : pos + 1]
        start = text.find(open_ch, start + 1)
    return None


def parse_json(answer: str) -> object:
    """The JSON value in `answer`; raises AnswerNotJson saying what was tried."""
    candidates: list[str] = [m.group(1).strip() for m in _FENCE.finditer(answer)]
    candidates.append(answer.strip())
    for open_ch, close_ch in (("{", "}"), ("[", "]")):
        span = _outermost(answer, open_ch, close_ch)
        if span is not None:
            candidates.append(span)
    errors = []
    for text in candidates:
        if not text:
            continue
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            errors.append(str(exc))
    shown = answer.strip()[:120].replace("\n", " ")
    raise AnswerNotJson(f"no JSON object or array in the answer ({errors[0] if errors else 'empty answer'}): {shown!r}")

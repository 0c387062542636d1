"""What every answer decoder shares: the error, the spec of a task, and tolerant conversions."""

from __future__ import annotations

import re
from typing import Any, Callable

import msgspec

from engram.providers.llm.jsonparse import AnswerNotJson, parse_json

MODEL_CONFIDENCE = 0.7
SENTIMENTS = ("positive", "negative", "neutral", "mixed")
ISO_DATE = re.compile(r"^\d{4}(?:-\d{2}(?:-\d{2})?)?$")


class AnswerInvalid(ValueError):
    """The answer is not the value the task asked for."""


class TaskSpec(msgspec.Struct, frozen=True):
    task: str
    expects_json: bool
    values: Callable[[Any], dict[str, str]]
    decode: Callable[[Any, str], object]
    # The response size the input itself asks for (WilmerAI maxResponseSizeInTokens), if any.
    response_tokens: Callable[[Any], int | None] = lambda _: None
    # The request's turns from (input, placeholder values, templates, rendered system prompt); None:
    # one user turn, the task's prompt template (or the input's own `prompt`) rendered with the values.
    turns: Callable[[Any, dict[str, str], Any, str], tuple[tuple[str, str], ...]] | None = None


def as_json(answer: str) -> Any:
    try:
        return parse_json(answer)
    except AnswerNotJson as exc:
        raise AnswerInvalid(str(exc)) from None


def convert(data: Any, typ: type, what: str) -> Any:
    try:
        return msgspec.convert(data, typ, strict=False)
    except msgspec.ValidationError as exc:
        raise AnswerInvalid(f"{what}: {exc}") from None


def items(data: Any, key: str) -> list:
    """The list under `key` (or the answer itself when the model sent a bare array)."""
    if isinstance(data, dict) and isinstance(data.get(key), list):
        return data[key]
    if isinstance(data, list):
        return data
    raise AnswerInvalid(f'expected an object with a "{key}" array')


def clamp(x: float) -> float:
    return round(min(1.0, max(0.0, float(x))), 3)


def text_answer(answer: str) -> str:
    text = answer.strip()
    if not text:
        raise AnswerInvalid("the answer is empty")
    return text



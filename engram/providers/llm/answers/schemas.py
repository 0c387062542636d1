"""The JSON schema of every task that answers in JSON: what a constrained decoder may produce.

One schema per JSON task, in the shape its decoder reads (`answers.cognitive`, `answers.discussion`). Every
string and array is bounded and every enum closed, so that a grammar-constrained model must close each string
and array within the answer's token budget (a weak model left unbounded writes one string until max_tokens),
and cannot even produce a value the decoder would reject. The prompts describe the answer in words and never
paste these schemas (small models echo a pasted schema back).
"""

from __future__ import annotations

from typing import Any

from engram.providers.llm.types import FACT_CATEGORIES, OBSERVATION_TYPES, TRACE_TYPES

SENTIMENTS = ("positive", "negative", "neutral", "mixed")


def _s(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


def _list(item: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": item, "maxItems": max_items}


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_NUMBER = {"type": "number", "minimum": 0, "maximum": 1}
_NAMES = _list(_s(60), 8)

SCHEMAS: dict[str, dict[str, Any]] = {
    "extract_memory": _obj({
        "title": _s(120),
        "summary": _s(800),
        "entities": _NAMES,
        "key_phrases": _NAMES,
        "sentiment": {"enum": list(SENTIMENTS)},
        "topics": _list(_s(40), 6),
    }),
    "observe": _obj({
        "notes": _list(_obj({
            "type": {"enum": list(OBSERVATION_TYPES)},
            "text": _s(300),
            "importance": _NUMBER,
            "entities": _NAMES,
            "lines": _list({"type": "integer"}, 8),
        }), 8),
    }),
    "reflect": _obj({
        "traces": _list(_obj({
            "content": _s(400),
            "trace_type": {"enum": list(TRACE_TYPES)},
            "importance": _NUMBER,
            "confidence": _NUMBER,
            "note_ids": _list(_s(40), 12),
            "entities": _NAMES,
            "tags": _list(_s(30), 6),
        }), 8),
        "contradictions": _list(_obj({"older": _s(40), "newer": _s(40), "reason": _s(200)}), 4),
    }),
    "extract_facts": _obj({
        "facts": _list(_obj({
            "category": {"enum": list(FACT_CATEGORIES)},
            "content": _s(300),
            "importance": _NUMBER,
            "entities": _NAMES,
            "line": {"type": "integer"},
        }), 8),
    }),
    "compact": _obj({
        "summary": _s(2000),
        "preserved_entities": _list(_s(60), 16),
        "dropped": _list(_s(40), 32),
    }),
}

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


def _s(max_length: int, min_length: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "string", "maxLength": max_length}
    if min_length:
        out["minLength"] = min_length
    return out


def _list(item: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": item, "maxItems": max_items}


def _obj(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_NUMBER = {"type": "number", "minimum": 0, "maximum": 1}
_NAMES = _list(_s(60), 8)

SCHEMAS: dict[str, dict[str, Any]] = {
    "extract_memory": _obj({
        "title": _s(120, 1),
        "summary": _s(800, 1),
        "entities": _NAMES,
        "key_phrases": _NAMES,
        "sentiment": {"enum": list(SENTIMENTS)},
        "topics": _list(_s(40), 6),
    }),
    "observe": _obj({
        "notes": _list(_obj({
            "type": {"enum": list(OBSERVATION_TYPES)},
            "text": _s(300, 1),
            "importance": _NUMBER,
            "entities": _NAMES,
            "refers_to": _s(10),  # YYYY-MM-DD, or "" (the decoder keeps only an ISO date)
            "details": _list(_s(120), 4),
            "lines": _list({"type": "integer"}, 8),
        }), 8),
    }),
    "reflect": _obj({
        "traces": _list(_obj({
            "content": _s(400, 1),
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
            "content": _s(300, 1),
            "importance": _NUMBER,
            "entities": _NAMES,
            "line": {"type": "integer"},
        }), 8),
    }),
    "compact": _obj({
        "summary": _s(2000, 1),
        "preserved_entities": _list(_s(60), 16),
        "dropped": _list(_s(40), 32),
    }),
}


# The most a grammar engine expands one bounded repetition to (llama.cpp refuses larger ones, and
# llama-cpp-python's server crashes on a grammar it cannot parse).
MAX_REPEAT = 1000


def worst_size(schema: dict[str, Any]) -> int:
    """The longest JSON text (characters) a value of `schema` can take, without escapes."""
    if "enum" in schema:
        return max(len(str(v)) + 2 for v in schema["enum"])
    kind: str = schema.get("type", "")
    if kind == "string":
        return schema.get("maxLength", 200) + 2
    if kind == "array":
        return 2 + schema.get("maxItems", 8) * (worst_size(schema.get("items", {})) + 2)
    if kind == "object":
        return 2 + sum(len(k) + 5 + worst_size(v) for k, v in schema.get("properties", {}).items())
    return {"integer": 17, "number": 24, "boolean": 5}.get(kind, 24)


def _scaled(schema: Any, factor: float) -> Any:
    if isinstance(schema, list):
        return [_scaled(v, factor) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _scaled(v, factor) for k, v in schema.items()}
    if "maxLength" in out:
        out["maxLength"] = max(out.get("minLength", 1), 4, min(MAX_REPEAT, int(out["maxLength"] * factor)))
    if "maxItems" in out:
        inner = worst_size(out.get("items", {}))
        out["maxItems"] = max(1, min(int(out["maxItems"] * factor), MAX_REPEAT // max(1, inner)))
    return out


def bounded(schema: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """`schema` with its string lengths and array sizes scaled down until its longest answer fits `max_chars`
    (the answer's token budget in characters): a grammar-constrained answer then always closes in time."""
    out = _scaled(schema, 1.0)
    for _ in range(40):
        if worst_size(out) <= max_chars:
            break
        out = _scaled(out, 0.8)
    return out

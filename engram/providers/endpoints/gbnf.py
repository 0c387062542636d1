"""A GBNF grammar (llama.cpp, KoboldCpp) from the bounded JSON-schema subset engram's answers use. Pure.

Objects with fixed properties (all written, in order), strings with minLength/maxLength, integers, numbers,
booleans, enums, arrays with minItems/maxItems. Bounds become repetition counts, so every string and array closes.
Only grammars made here are ever sent: an invalid grammar crashes llama-cpp-python's server.

A front end's schema (the doors' `format`/`response_format`) is held to what the grammar enforces (`unenforced`):
a keyword it would leave out (`pattern`, `minimum`, `anyOf`…) is refused by name, never silently weakened.
engram's own answer schemas also bound numbers (`minimum`/`maximum`), which their readers clamp.
"""

from __future__ import annotations

import json
import re
from typing import Any

_BASE = r'''ws ::= [ ]?
char ::= [^"\\\x00-\x1f] | "\\" ["\\/nt]
integer ::= "-"? ([0-9] | [1-9] [0-9]{1,15})
number ::= integer ("." [0-9]{1,6})?
boolean ::= "true" | "false"'''


def _literal(text: str) -> str:
    """A GBNF string literal matching `text` exactly."""
    return json.dumps(text)


class _Builder:
    def __init__(self) -> None:
        self.rules: dict[str, str] = {}

    def add(self, name: str, body: str) -> str:
        name = re.sub(r"[^a-zA-Z0-9-]", "-", name)
        base, n = name, 1
        while name in self.rules and self.rules[name] != body:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        return name

    def rule(self, schema: dict[str, Any], name: str) -> str:
        if "enum" in schema:
            return self.add(name, " | ".join(_literal(json.dumps(v)) for v in schema["enum"]))
        kind = schema.get("type")
        if kind == "string":
            low, bound = int(schema.get("minLength", 0)), int(schema.get("maxLength", 200))
            return self.add(f"str{low}-{bound}", f'"\\"" char{{{low},{bound}}} "\\""')
        if kind == "integer":
            return "integer"
        if kind == "number":
            return "number"
        if kind == "boolean":
            return "boolean"
        if kind == "array":
            item = self.rule(schema.get("items", {"type": "string", "maxLength": 200}), f"{name}-item")
            low, bound = int(schema.get("minItems", 0)), int(schema.get("maxItems", 8))
            if low > bound:
                raise ValueError(f"minItems {low} is above maxItems {bound}")
            items = f'{item} ( ws "," ws {item} ){{{max(0, low - 1)},{max(0, bound - 1)}}}'
            return self.add(name, f'"[" ws {items} ws "]"' if low else f'"[" ws ( {items} )? ws "]"')
        if kind == "object" and "properties" not in schema:  # any JSON object (Ollama's "format": "json")
            return self.any_object()
        if kind == "object":
            parts = []
            for key, sub in schema.get("properties", {}).items():
                value = self.rule(sub, f"{name}-{key}")
                parts.append(f'{_literal(json.dumps(key))} ws ":" ws {value}')
            inner = ' ws "," ws '.join(parts)
            return self.add(name, f'"{{" ws {inner} ws "}}"' if parts else '"{" ws "}"')
        raise ValueError(f"the grammar generator does not take {schema!r:.80}")

    def any_object(self) -> str:
        """Any JSON object, nesting bounded (four levels) so that the rules stay finite and every value closes."""
        self.add("jstr", '"\\"" char{0,200} "\\""')
        inner = "jstr | number | boolean | \"null\""
        for depth in range(4):
            obj = self.add(f"jobj{depth}", f'"{{" ws ( jstr ws ":" ws ( {inner} ) ( ws "," ws jstr ws ":" ws ( {inner} ) ){{0,15}} )? ws "}}"')
            arr = self.add(f"jarr{depth}", f'"[" ws ( ( {inner} ) ( ws "," ws ( {inner} ) ){{0,15}} )? ws "]"')
            inner = f"jstr | number | boolean | \"null\" | {obj} | {arr}"
        return "jobj3"


# What the grammar enforces of a schema (or that says nothing a value must meet); any other keyword is not enforced.
ENFORCED = frozenset({"type", "properties", "items", "enum", "minLength", "maxLength", "minItems", "maxItems",
                      "required", "additionalProperties", "title", "description", "$schema", "default", "examples"})


def unenforced(schema: Any) -> str | None:
    """The first keyword of `schema` (nested ones included) the grammar would not enforce, else None. Every property
    is written, so `required` holds; only the listed properties are, so `additionalProperties` does too."""
    if not isinstance(schema, dict):
        return None
    for key, value in schema.items():
        if key not in ENFORCED:
            return key
        if key == "type" and not isinstance(value, str):
            return "type (a list of types)"
        if key == "properties" and isinstance(value, dict):
            found = next((k for k in map(unenforced, value.values()) if k), None)
            if found:
                return found
        if key == "items":
            found = unenforced(value)
            if found:
                return found
    return None


def grammar(schema: dict[str, Any]) -> str:
    """The GBNF grammar whose `root` matches JSON values of `schema`."""
    b = _Builder()
    top = b.rule(schema, "value")
    rules = [f"root ::= {top}"] + [f"{name} ::= {body}" for name, body in b.rules.items()]
    return "\n".join(rules) + "\n" + _BASE + "\n"

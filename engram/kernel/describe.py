"""A field's description, given once on its declaration (`Annotated[T, doc("…")]`): msgspec's JSON Schema carries it
into the OpenAPI document (`/openapi.json`) and MCP's tool output schemas, so a field is described where it is
declared and nowhere else. tests/server/test_openapi_document.py fails on any property without one."""

from __future__ import annotations

import msgspec


def doc(text: str) -> msgspec.Meta:
    """What a field means, for a reader of the API's schema (a sentence; units and null's meaning included)."""
    return msgspec.Meta(description=text)

"""One memory's kind and a listing's kind are two types (mypy found them declared under one name, the second
replacing the first: `MemoryItem.kind` was described, and validated, as the listing's plural kinds)."""

from __future__ import annotations

import msgspec

from engram.api import types as t


def _kind_enum(cls: type) -> list[str]:
    schema = msgspec.json.schema(cls)
    return schema["$defs"][cls.__name__]["properties"]["kind"]["enum"]


def test_a_memory_items_kind_is_one_of_the_kinds_the_routes_answer_with():
    assert sorted(_kind_enum(t.MemoryItem)) == ["chunk", "fact", "trace", "vector"]
    item = {"kind": "trace", "memory_id": "t1", "agent": "ann", "discussion": None, "content": "x",
            "created": "2024-05-01T09:00:00Z", "seq": 3}
    assert msgspec.convert(item, t.MemoryItem).kind == "trace"  # what a client decodes


def test_a_listing_names_its_kind_in_the_plural():
    assert sorted(_kind_enum(t.MemoryPage)) == ["chunks", "observations", "traces", "vectors"]

"""Hypothesis strategies for engram's events, read off the catalogue's msgspec types (so a new event type or
field is generated without anyone touching this file)."""

from __future__ import annotations

import msgspec
from hypothesis import strategies as st

from engram.events.base import registry
from engram.events.validation import MAX_TS_US, MIN_TS_US

_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False, allow_infinity=False),
                       st.text(max_size=20))
JSON = st.recursive(_json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                    max_leaves=12)


def for_type(t: msgspec.inspect.Type, *, hostile: bool) -> st.SearchStrategy:
    """Values of msgspec type `t`; `hostile` adds what the log must refuse (NaN, infinities, lone surrogates)."""
    I = msgspec.inspect
    if isinstance(t, I.StrType):
        text = st.text(max_size=40)
        return st.one_of(text, st.just("broken \ud800 text")) if hostile else text
    if isinstance(t, I.BoolType):
        return st.booleans()
    if isinstance(t, I.IntType):
        return st.integers(t.ge if t.ge is not None else -(2**63), t.le if t.le is not None else 2**63 - 1)
    if isinstance(t, I.FloatType):
        return st.floats(allow_nan=hostile, allow_infinity=hostile, width=64)
    if isinstance(t, I.NoneType):
        return st.none()
    if isinstance(t, I.UnionType):
        return st.one_of(*[for_type(x, hostile=hostile) for x in t.types])
    if isinstance(t, I.VarTupleType):
        return st.lists(for_type(t.item_type, hostile=hostile), max_size=4).map(tuple)
    if isinstance(t, I.ListType):
        return st.lists(for_type(t.item_type, hostile=hostile), max_size=4)
    if isinstance(t, I.DictType):
        keys = st.text(max_size=12) if isinstance(t.key_type, I.AnyType) else for_type(t.key_type, hostile=hostile)
        return st.dictionaries(keys, for_type(t.value_type, hostile=hostile), max_size=4)
    if isinstance(t, I.AnyType):
        return JSON
    if isinstance(t, I.StructType):
        return struct(t.cls, hostile=hostile)
    raise NotImplementedError(f"no strategy for {t!r}: add one when the catalogue uses it")


def struct(cls: type, *, hostile: bool) -> st.SearchStrategy:
    info = msgspec.inspect.type_info(cls)
    fields = {}
    for f in info.fields:
        strategy = for_type(f.type, hostile=hostile)
        if not f.required:  # leave it at its default now and then
            strategy = st.one_of(st.just(f.default if f.default is not msgspec.NODEFAULT else None), strategy) \
                if f.default is not msgspec.NODEFAULT else strategy
        fields[f.name] = strategy
    return st.builds(cls, **fields)


def events(*, hostile: bool = False) -> st.SearchStrategy:
    """An event of any type of the catalogue (but the read-side `Unreadable`)."""
    classes = [cls for tag, cls in sorted(registry().items()) if tag != "Unreadable"]
    return st.one_of(*[struct(cls, hostile=hostile) for cls in classes])


timestamps = st.integers(MIN_TS_US, MAX_TS_US - 1)

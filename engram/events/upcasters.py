"""Upcasters: stored payloads of an old schema version are lifted to the current one on read.

An upcaster is a small function `dict -> dict` registered for (type, from_version); a chain
v1 → v2 → v3 runs in order. Stored data is never rewritten.
"""

from __future__ import annotations

from typing import Any, Callable

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

_upcasters: dict[tuple[str, int], Upcaster] = {}


def upcaster(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register `fn` to lift `event_type` payloads from `from_version` to `from_version + 1`."""

    def register(fn: Upcaster) -> Upcaster:
        key = (event_type, from_version)
        if key in _upcasters and _upcasters[key] is not fn:
            raise ValueError(f"an upcaster for {event_type} v{from_version} is already registered")
        _upcasters[key] = fn
        return fn

    return register


def upcast(event_type: str, payload: dict[str, Any], from_version: int, to_version: int) -> dict[str, Any]:
    version = from_version
    while version < to_version:
        fn = _upcasters.get((event_type, version))
        if fn is None:
            raise LookupError(f"no upcaster for {event_type} from schema v{version} to v{version + 1}")
        payload = fn(payload)
        version += 1
    return payload

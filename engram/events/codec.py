"""Encoding events to the log's JSON payloads and decoding them back (with upcasting).

One encoder and one decoder per type, created once and reused.
"""

from __future__ import annotations

import msgspec

from engram.events.base import Event, event_class
from engram.events.upcasters import upcast

_encoder = msgspec.json.Encoder()
_decoders: dict[type, msgspec.json.Decoder[Event]] = {}
_json = msgspec.json.Decoder()


def encode(event: Event) -> str:
    """The JSON payload of `event` (it carries its own `type` tag too)."""
    return _encoder.encode(event).decode()


_current: dict[tuple[str, int], msgspec.json.Decoder[Event]] = {}  # hot path: (type, version) -> decoder


def decode(event_type: str, schema_version: int, payload: str | bytes) -> Event:
    dec = _current.get((event_type, schema_version))
    if dec is not None:
        return dec.decode(payload)
    cls = event_class(event_type)
    if schema_version == cls.SCHEMA_VERSION:
        dec = _decoders.get(cls)
        if dec is None:
            dec = _decoders[cls] = msgspec.json.Decoder(cls)
        _current[(event_type, schema_version)] = dec
        return dec.decode(payload)
    if schema_version > cls.SCHEMA_VERSION:
        raise ValueError(
            f"{event_type} payload has schema v{schema_version}, newer than this engram knows (v{cls.SCHEMA_VERSION})"
        )
    data = _json.decode(payload)
    data = upcast(event_type, data, schema_version, cls.SCHEMA_VERSION)
    data["type"] = event_type
    return msgspec.convert(data, cls)

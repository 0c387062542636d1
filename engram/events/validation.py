"""What the log accepts: every event is checked against exactly what its folds accept before it
is acknowledged, so that nothing in the append-only log can break a projection or a policy later.

- the payload decodes back into its type with the decoder every fold uses (types of every field,
  integers in range: a `name` of 123 where a string belongs is refused here, not in every fold);
- every number is finite (msgspec writes NaN and infinities as `null`, which a fold then misreads);
- the event time lies in a sane range (folds turn it into dates and add intervals to it);
- every string encodes as UTF-8 (no lone surrogates);
- the stream and agent are valid ids, and the event type adds its own checks (`Event.check`, e.g.
  `SettingsChanged` parses its settings with the model of its scope).

Pure functions: the EventStore calls `check_write` in the appending caller's thread, before the
write joins a group commit, so a bad write fails alone.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from operator import attrgetter
from typing import Any, Callable, Sequence

import msgspec

from engram.events.base import Event
from engram.events.envelope import Write, iso, to_us
from engram.kernel.ids import InvalidIdError, validate_agent, validate_id

# Event times engram accepts: from 1900 (imported history) to 2200. Folds compute dates and add
# decay intervals and clock periods to event times; far outside this range Python's datetime
# (years 1-9999) and DuckDB's TIMESTAMPTZ give out.
MIN_TS_US = to_us(datetime(1900, 1, 1, tzinfo=timezone.utc))
MAX_TS_US = to_us(datetime(2200, 1, 1, tzinfo=timezone.utc))
MAX_EVENT_ID_CHARS = 512
AGENT_STREAM_PREFIX = "agent:"
_INT64 = 1 << 63


class InvalidEvent(ValueError):
    """An event the log refuses; the message names the stream, the event type and the reason."""


_decoders: dict[type, msgspec.json.Decoder[Any]] = {}


def _decoder(cls: type) -> msgspec.json.Decoder[Any]:
    dec = _decoders.get(cls)
    if dec is None:
        dec = _decoders[cls] = msgspec.json.Decoder(cls)
    return dec


def check_ts(ts_us: object) -> None:
    if not isinstance(ts_us, int) or isinstance(ts_us, bool):
        raise InvalidEvent(f"event time {ts_us!r} is not an integer number of microseconds")
    if not MIN_TS_US <= ts_us < MAX_TS_US:
        raise InvalidEvent(
            f"event time {ts_us} µs is outside {iso(MIN_TS_US)} .. {iso(MAX_TS_US)}"
            + (f" ({ts_us / 1e6:.6g} s since 1970)" if abs(ts_us) < 1e30 else "")
        )


def check_stream(stream: object, agent: object) -> None:
    try:
        validate_agent(agent)
        if isinstance(stream, str) and stream.startswith(AGENT_STREAM_PREFIX):
            if stream[len(AGENT_STREAM_PREFIX):] != agent:
                raise InvalidEvent(f"stream {stream!r} is another agent's stream than {agent!r}")
        else:
            validate_id(stream, "stream")
    except InvalidIdError as exc:
        raise InvalidEvent(str(exc)) from None


def _all_finite(value: Any) -> bool:
    """No NaN, infinity or out-of-range integer in `value` (builtins): the check every appended event
    passes, without building the path of each element on the way (`non_finite` names the bad one)."""
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is int:
        return bool(-_INT64 <= value < _INT64)
    if kind is dict:
        value = value.values()
    elif kind is not list and kind is not tuple:
        return non_finite(value) is None  # a subclass of a builtin: the general walk
    for v in value:
        k = type(v)
        if k is str or v is None:
            continue
        if k is float:
            if not math.isfinite(v):
                return False
        elif k is int:
            if not -_INT64 <= v < _INT64:
                return False
        elif not _all_finite(v):
            return False
    return True


def non_finite(value: object, path: str = "$") -> str | None:
    """The path of the first NaN or infinity in `value` (builtins: dicts, lists, numbers), else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, int) and not isinstance(value, bool):
        return None if -_INT64 <= value < _INT64 else path
    if isinstance(value, dict):
        for k, v in value.items():
            found = non_finite(v, f"{path}.{k}")
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = non_finite(v, f"{path}[{i}]")
            if found:
                return found
    return None


# An integer of 19 digits or more in a payload: the only JSON numbers that may lie outside int64 (the encoder
# refuses what lies outside uint64). Digits inside a string count too; they only send the event to the full check.
# Found by mapping every digit to "0" and everything else to " " (two C passes; a regular expression scan took
# longer than the rest of the check).
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def _long_integer(payload: bytes) -> bool:
    return _LONG_RUN in payload.translate(_DIGITS_AS_ZERO)


# Field types whose values the decoder compares completely: a value of another kind in such a field (a number in a
# text field, a number among a dict's texts) does not decode, so the event takes the full check anyway.
_TEXT_TYPES = (msgspec.inspect.StrType, msgspec.inspect.NoneType, msgspec.inspect.BoolType)
_NUMBER_TYPES = (msgspec.inspect.IntType, msgspec.inspect.FloatType)
_NUMBERS_AT: dict[type, tuple[Callable[[Any], Any], ...] | None] = {}
_NUMBER_KINDS = {int, float, type(None)}


def _numbers_at(cls: type) -> tuple[Callable[[Any], Any], ...] | None:
    """Getters of the fields of `cls` that may hold a number out of int64's range, when only its own fields can (of
    types int, float, text, bool, None, unions of them, and collections of text); None when numbers may sit deeper
    (nested structs, lists of numbers, Any): its payloads are scanned for long runs of digits instead. Derived
    once per type."""
    if cls in _NUMBERS_AT:
        return _NUMBERS_AT[cls]
    getters: list[Callable[[Any], Any]] | None = []
    for field in msgspec.inspect.type_info(cls).fields:  # type: ignore[attr-defined]  # a Struct: StructType
        kinds = field.type.types if isinstance(field.type, msgspec.inspect.UnionType) else (field.type,)
        if all(isinstance(k, _NUMBER_TYPES + _TEXT_TYPES) for k in kinds):
            if any(isinstance(k, _NUMBER_TYPES) for k in kinds):
                getters.append(attrgetter(field.name))  # type: ignore[union-attr]
        elif not all(_holds_only_text(k) for k in kinds):
            getters = None
            break
    _NUMBERS_AT[cls] = found = None if getters is None else tuple(getters)
    return found


def _holds_only_text(kind: Any) -> bool:
    if isinstance(kind, _TEXT_TYPES):
        return True
    if isinstance(kind, msgspec.inspect.DictType):
        return _holds_only_text(kind.key_type) and _holds_only_text(kind.value_type)
    if isinstance(kind, (msgspec.inspect.ListType, msgspec.inspect.VarTupleType, msgspec.inspect.SetType,
                         msgspec.inspect.FrozenSetType)):
        return _holds_only_text(kind.item_type)
    return False


def _may_leave_int64(cls: type, events: Sequence[Event], payloads: Sequence[bytes]) -> bool:
    """Whether an integer of `events` (their payloads decoded back equal) may lie outside int64: False means none
    does, True sends the events to the full check. Looks at the values of the type's number fields when only those
    can hold numbers (`_numbers_at`, a few C loops a write), else at the payloads' runs of digits."""
    getters = _numbers_at(cls)
    if getters is None:
        return _long_integer(b",".join(payloads))
    for get in getters:
        values = list(map(get, events))
        kinds = set(map(type, values))
        if not kinds <= _NUMBER_KINDS:  # a subclass of int (or bool in a number field): the payload scan decides
            return _long_integer(b",".join(payloads))
        if int in kinds:
            ints = values if len(kinds) == 1 else [v for v in values if type(v) is int]
            if min(ints) < -_INT64 or max(ints) >= _INT64:
                return True
    return False


def check_events(events: Sequence[Event], payloads: Sequence[bytes]) -> None:
    """`check_event` for each event and its payload, in order (the first failure is the one reported). A write of
    many events of one type (an import) takes the quick way for all of them in one loop, or the full way for each.
    Each decoded event is let go as soon as it is compared: a write's worth of them held at once (decoding the
    payloads as one JSON array) outlived the young generation of Python's collector and made it walk the whole
    heap again and again (more CPU than the check saved, in bench/append.py)."""
    if len(events) > 1:
        cls = type(events[0])
        if all(type(e) is cls for e in events):
            decode = _decoder(cls).decode
            try:
                same = all(decode(p) == e for e, p in zip(events, payloads))
            except msgspec.ValidationError:
                same = False
            if same and not _may_leave_int64(cls, events, payloads):
                if cls.check is not Event.check:  # the type has checks of its own
                    for event in events:
                        _check_own(event)
                return
    for event, payload in zip(events, payloads):
        check_event(event, payload)


def _check_own(event: Event) -> None:
    """The event type's own checks (`Event.check`)."""
    try:
        event.check()
    except InvalidEvent:
        raise
    except ValueError as exc:
        raise InvalidEvent(f"{event.tag()}: {exc}") from None


def check_event(event: Event, payload: bytes) -> None:
    """`payload` (the event's JSON) is what the folds of its type accept.

    The common case costs one decode: the payload decodes, with the decoder every fold uses, back into an event
    equal to `event`, and holds no integer long enough to leave int64. Equal means no number was lost on the way
    (the encoder writes NaN and infinities as null, which decodes to None or fails, never to an equal value), so
    `event` is finite. Anything else (a decode error, a difference, a long integer) takes the full check below,
    which says what is wrong; the outcome is the same either way, the fast way skips building and walking the
    event's builtins (most of the check's time: appends lost a quarter of their speed to it)."""
    cls = type(event)
    try:
        back = _decoder(cls).decode(payload)
    except msgspec.ValidationError:
        back = None
    if back is not None and back == event and not _may_leave_int64(cls, (event,), (payload,)):
        _check_own(event)
        return
    _check_event_fully(event, payload)


def _check_event_fully(event: Event, payload: bytes) -> None:
    cls = type(event)
    value = msgspec.to_builtins(event)
    bad = None if _all_finite(value) else non_finite(value)
    if bad:
        raise InvalidEvent(f"{cls.tag()}: {bad[2:] or 'a value'} is not a finite number")
    try:
        _decoder(cls).decode(payload)
    except msgspec.ValidationError as exc:
        raise InvalidEvent(f"{cls.tag()}: {exc}") from None
    _check_own(event)


def check_write(write: Write) -> None:
    """Everything about `write` but its payloads (see `check_event`)."""
    check_stream(write.stream, write.agent)
    for item in write.events:
        if not isinstance(item.event, Event):
            raise InvalidEvent(f"stream {write.stream!r}: {type(item.event).__name__} is not an event")
        check_ts(item.ts_us)
        if item.event_id is not None and (not isinstance(item.event_id, str) or not item.event_id
                                          or len(item.event_id) > MAX_EVENT_ID_CHARS):
            raise InvalidEvent(
                f"{item.event.tag()}: event id must be 1-{MAX_EVENT_ID_CHARS} characters of text, got {item.event_id!r:.60}"
            )
        if item.causation is not None and (not isinstance(item.causation, int) or not 0 < item.causation < _INT64):
            raise InvalidEvent(f"{item.event.tag()}: causation {item.causation!r} is not a position in the log")

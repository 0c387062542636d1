"""The envelope around an event: what is asked to be appended, and what was recorded."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import msgspec

from engram.events.base import Event

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def to_us(ts: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (naive datetimes are taken as UTC)."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    delta = ts - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def iso(us: int) -> str:
    """ISO-8601 UTC text of an event time, the one format engram writes into files."""
    return from_us(us).isoformat().replace("+00:00", "Z")


class NewEvent(msgspec.Struct, frozen=True):
    """One event to append, with its event time and optional client id and cause."""

    event: Event
    ts_us: int
    event_id: str | None = None  # client-supplied id: a retried append with it returns the original seq
    causation: int | None = None  # seq of the event that caused this one


class Write(msgspec.Struct, frozen=True):
    """Events for one stream, appended all or nothing.

    `expected_version`: None accepts any current version; 0 demands a new stream; n demands
    that the stream is at version n. Events whose `event_id` was already recorded are not
    appended again and count as success.
    """

    stream: str
    agent: str
    events: tuple[NewEvent, ...]
    expected_version: int | None = None


class Appended(msgspec.Struct, frozen=True):
    """The outcome of a Write: the seq of each of its events (original seqs for duplicates)."""

    stream: str
    seqs: tuple[int, ...]
    stream_version: int
    duplicates: int = 0


class Recorded(msgspec.Struct, frozen=True):
    """An event as the log holds it."""

    seq: int
    stream: str
    stream_version: int
    agent: str
    ts_us: int
    event: Event
    causation: int | None = None
    event_id: str | None = None
    shard: int = 0

    @property
    def type(self) -> str:
        return self.event.tag()

    @property
    def ts(self) -> datetime:
        return from_us(self.ts_us)

"""The API's clock: event time of requests that carry none (the API is a shell; the domain never reads a clock)."""

from __future__ import annotations

import time
from datetime import datetime, timezone

# Event times outside these bounds are refused (a year 1970..2200 in µs): a typo is not a date.
MIN_TS_US = 0
MAX_TS_US = 7_258_118_400_000_000


def now_us() -> int:
    return int(time.time() * 1_000_000)


def to_us(ts: datetime | None) -> int:
    """Event time of a request field (a naive time is UTC); now when absent."""
    from engram.api.errors import error

    if ts is None:
        return now_us()
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    us = int(ts.timestamp() * 1_000_000)
    if not MIN_TS_US <= us <= MAX_TS_US:
        raise error("invalid_request", f"time {ts.isoformat()} is outside 1970..2200")
    return us


def iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc).isoformat().replace("+00:00", "Z")

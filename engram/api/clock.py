"""The API's clock: event time of requests that carry none (the API is a shell; the domain never reads a clock)."""

from __future__ import annotations

import time
from datetime import datetime, timezone

# Event times outside these bounds are refused (a year 1970..2200 in µs): a typo is not a date.
MIN_TS_US = 0
MAX_TS_US = 7_258_118_400_000_000


def now_us() -> int:
    return int(time.time() * 1_000_000)


def to_us(ts: datetime | None, *, max_ahead_s: float | None) -> int:
    """Event time of a request field (a naive time is UTC); now when absent.

    The one rule for times a client gives (limits.maxFutureSeconds, engram.config.service): any time in the past is
    taken as given (imported history keeps its own dates), but a time more than `max_ahead_s` after this server's
    clock is refused. Event time is the design's clock: one message dated 2199 would move the agent's decay and
    consolidation clock 170 years ahead. The rule is applied here, when a request arrives, before anything is
    recorded; replay folds the recorded times and never applies it. None: no bound (a time that is not recorded,
    such as a recall that only looks)."""
    from engram.api.errors import error

    if ts is None:
        return now_us()
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    us = int(ts.timestamp() * 1_000_000)
    if not MIN_TS_US <= us <= MAX_TS_US:
        raise error("invalid_request", f"time {ts.isoformat()} is outside 1970..2200")
    now = now_us()
    if max_ahead_s is not None and us > now + max_ahead_s * 1_000_000:
        raise error("invalid_request", f"time {iso(us)} is more than {max_ahead_s:g} s after this server's clock: "
                    "event time is memory's clock, and nothing can be recorded from the future "
                    "(limits.maxFutureSeconds in engram.json)")
    return us


def iso(us: int) -> str:
    return datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc).isoformat().replace("+00:00", "Z")

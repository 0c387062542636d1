"""Flow control: a burst of appends slows its producers instead of growing memory.

- `Backpressure`: the clear signal. The API answers it as 429 `backpressure` with a `Retry-After` header; the
  Python clients raise it as an `ApiError` whose `retry_after` says when to try again.
- `InFlight`: at most `limit` calls in flight to one consumer (a shard). A caller past the limit waits, at
  most `wait_s` (bounded blocking), then gets `Backpressure`: queued work is bounded by `limit`, not by how
  fast producers send.
- A shard refuses appends while its projections are more than `max_lag` events behind its log
  (`ShardHost.append_many`): the log would keep growing while memory creation falls further behind.

Policies pull their work (a bounded batch per read, `PolicyHost.batch`), so their in-flight work is bounded
by construction.
"""

from __future__ import annotations

import threading


class Backpressure(RuntimeError):
    """Too much in flight: try again after `retry_after_s` seconds (nothing of the refused call was written)."""

    def __init__(self, message: str, retry_after_s: float = 1.0):
        super().__init__(message)
        self.retry_after_s = retry_after_s

    def __reduce__(self) -> tuple[type[Backpressure], tuple[str, float]]:  # crosses process boundaries (Ray) intact
        return (Backpressure, (str(self), self.retry_after_s))


class InFlight:
    """A bounded window of calls in flight to one consumer."""

    def __init__(self, name: str, limit: int, wait_s: float, retry_after_s: float = 1.0):
        self.name, self.limit, self.wait_s, self.retry_after_s = name, limit, wait_s, retry_after_s
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.refused = 0

    def __enter__(self) -> "InFlight":
        if not self._slots.acquire(timeout=self.wait_s):
            with self._lock:
                self.refused += 1
            raise Backpressure(f"{self.name} has {self.limit} appends in flight (limits.maxInflightAppends); "
                               f"retry after {self.retry_after_s:g}s", self.retry_after_s)
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.in_flight -= 1
        self._slots.release()

"""Where a consumer's time goes: seconds and counts per stage, summed since the process started.

The projection runner and the policy host measure each consumer's stages (reading the log,
folding or deciding, appending, checkpointing or snapshotting) with `StageTimings`; `engram status`
and `bench/ingest.py` show the sums, so a slow ingest says which stage of which consumer is slow.
Measurement only (a monotonic timer): no decision ever depends on it.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator


class StageTimings:
    def __init__(self) -> None:
        self._totals: dict[str, dict[str, float]] = {}
        self._lock = threading.Lock()

    def add(self, consumer: str, key: str, value: float) -> None:
        with self._lock:
            stages = self._totals.setdefault(consumer, {})
            stages[key] = stages.get(key, 0.0) + value

    @contextmanager
    def measure(self, consumer: str, stage: str) -> Iterator[None]:
        """Adds the seconds the block took to `<stage>_s` of `consumer` (also when it raises)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(consumer, f"{stage}_s", time.perf_counter() - started)

    def report(self) -> dict[str, dict[str, float]]:
        """consumer -> stage -> total (seconds rounded to the millisecond, counts as integers)."""
        with self._lock:
            return {
                consumer: {k: (round(v, 3) if k.endswith("_s") else int(v)) for k, v in sorted(stages.items())}
                for consumer, stages in sorted(self._totals.items())
            }

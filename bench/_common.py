"""What several benchmarks share: percentiles and client threads started together."""

from __future__ import annotations

import threading
import time


def pct(values: list[float], q: float) -> float | None:
    """The q-quantile of `values` (the nearest rank, linear index), rounded to 0.01; None for no values."""
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(q * (len(values) - 1))))], 2)


def run_threads(worker, count: int) -> float:
    """Run `worker(i)` for each of `count` threads at once; the wall time until the last one ends."""
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    started = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - started

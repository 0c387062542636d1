"""Holding Python's cyclic garbage collector off for a batch of work (see `collector_paused`)."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while a batch of the log is decoded and folded (by the projection
    runner) or handled (by a policy host).

    A batch is some 20,000 events, each a row, a `Recorded`, its event and the event's containers: objects that
    live until the batch is folded, so the collector's young generations keep finding them alive, promote them,
    and every few thousand events a full collection walks everything the process holds. In a 1M-event replay that
    was some forty full collections and a quarter of its time. Nothing of a batch is a cycle (a decoded event refers
    to no other object of engram), so its objects are freed by their reference counts when the batch is done, and
    the collector, on again, has little to find. The collector is process-wide: another thread's cycles wait for
    the end of the batch (a fraction of a second); when it was off already (someone else's choice) it stays off.

    A policy host's batch builds its policies' state (traces, edges, schemas) as it goes: objects that live on, which
    the young generations kept promoting and full collections kept walking. LoCoMo dev in one process (the policies
    and projections of `bench/ingest.py`): 2,015 young, 183 middle and 12 full collections, 4-5 s in all, with the
    policies' batches unpaused; 170, 15 and 1 (under 1 s) paused."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

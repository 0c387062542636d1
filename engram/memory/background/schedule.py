"""Each trace's own consolidation timeline: when the decay sweep prunes it, when its reviews fall due.

Consolidation runs at interval boundaries (every hour of event time by default, from the epoch, UTC).
What the decay sweep and spaced repetition do to one trace at those boundaries depends on that trace
alone — its strength, stability and review schedule — until something outside changes it (a retrieval,
a correction, forgetting). So its timeline is known without visiting the boundaries in between:

    prune   at the first boundary b (after its last check) where S(b) < pruneThreshold (0.05)
    review  at the first boundary b >= its next due time, if its review schedule is worth keeping
            (retrieved before, flashbulb, important enough, or made long-term by the background processes)

whichever comes first (at one boundary the decay sweep comes before the review, as in a run's step order).
This is what makes consolidation cost what is due rather than the hours that passed (a message a year
after the last one brings the reviews and prunes that fell due in that year, each at its own boundary,
not 8,760 idle runs), and what makes an import order-independent: a trace imported after later ones is
consolidated along the same timeline it would have had live. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import replace

from engram.config import defaults as d
from engram.memory.cognitive.decay import apply_reinforcement, reinforce, strength_at
from engram.memory.cognitive.model import MemoryTrace

# Traces the background processes themselves made long-term (the Reflector's, the schemas): rehearsed.
CONSOLIDATED_SOURCES = frozenset({"observation", "reflection", "schema"})
# A review schedule at most doubles per review up to a year: a timeline is walked in far fewer steps.
MAX_STEPS = 256
# A trace still kept by its reviews this long after its last access is taken to stay (no walk goes further).
HORIZON_US = 10 * 365 * 86_400 * 1_000_000


def time_order(t: MemoryTrace) -> tuple[object, ...]:
    """A trace's place in time, the same whatever order things were imported in: its event time, then (for traces
    of one instant, e.g. the turns of a dated session) its discussion and its messages' order there and content.
    Trace ids and log positions are not used first: they depend on when a trace reached the log."""
    return (t.encoded_us, t.stream, t.source_seqs, t.category, t.content, t.trace_id)


def worth_reviewing(t: MemoryTrace) -> bool:
    """A review schedule worth keeping: retrieved before, a flashbulb memory, important enough, or
    elevated to long-term memory by the Reflector or schema integration."""
    return (
        t.retrieval_count > 0 or t.flashbulb or t.importance >= d.REVIEW_MIN_IMPORTANCE
        or t.source_type in CONSOLIDATED_SOURCES
    )


def floor_boundary(ts_us: int, every_us: int) -> int:
    """The latest boundary at or before `ts_us`."""
    return (ts_us // every_us) * every_us


def ceil_boundary(ts_us: int, every_us: int) -> int:
    """The earliest boundary at or after `ts_us`."""
    b = floor_boundary(ts_us, every_us)
    return b if b == ts_us else b + every_us


def first_check(t: MemoryTrace, checked_us: int, every_us: int) -> int:
    """The first boundary at which `t` may be looked at: not before it was encoded or last accessed, and
    after the boundary it was last checked at (`checked_us`, 0 if never)."""
    start = max(ceil_boundary(t.encoded_us, every_us), ceil_boundary(t.last_access_us, every_us))
    if checked_us:
        start = max(start, checked_us + every_us)
    return start


def prune_boundary(t: MemoryTrace, start_us: int, every_us: int, threshold: float) -> int:
    """The first boundary >= `start_us` where the decay sweep finds `t` below `threshold` (no reinforcement between)."""
    if strength_at(t, start_us) < threshold:
        return start_us
    # S(t) = S0 · exp(−Δt / stability) < threshold  <=>  Δt > stability · ln(S0 / threshold)
    crossing = t.last_access_us + int(t.stability_s * math.log(t.encoding_strength / threshold) * 1_000_000)
    b = max(start_us, floor_boundary(crossing, every_us))
    while strength_at(t, b) >= threshold:
        b += every_us
    return b


def next_check(t: MemoryTrace, checked_us: int, every_us: int, threshold: float) -> tuple[int, str]:
    """(boundary, "prune" | "review"): the next thing consolidation does to `t` on its own."""
    start = first_check(t, checked_us, every_us)
    prune = prune_boundary(t, start, every_us, threshold)
    if worth_reviewing(t):
        review = max(start, ceil_boundary(t.next_due_us, every_us))
        if review < prune:
            return review, "review"
    return prune, "prune"


def fades_at(t: MemoryTrace, every_us: int, threshold: float, checked_us: int = 0) -> int | None:
    """The boundary at which the decay sweep prunes an active `t` on its own timeline (its reviews made as they
    fall due), or None if it outlives MAX_STEPS reviews."""
    walk = replace(t, links=set())
    for _ in range(MAX_STEPS):
        b, what = next_check(walk, checked_us, every_us, threshold)
        if what == "prune":
            return b
        if b - t.last_access_us > HORIZON_US:
            return None
        apply_reinforcement(walk, reinforce(walk, b))
        checked_us = b
    return None


def alive_at(t: MemoryTrace, at_us: int, every_us: int, threshold: float, checked_us: int = 0) -> bool:
    """Whether `t` is still active at event time `at_us` on its own timeline: its reviews fall due and are
    made, and no boundary up to `at_us` finds it below the threshold. Answers without waiting for the
    Consolidator to have recorded it (auto-ingest asks it of possible duplicates)."""
    if not t.active:
        return t.deleted_us is not None and t.deleted_us > at_us
    walk = replace(t, links=set())
    for _ in range(MAX_STEPS):
        b, what = next_check(walk, checked_us, every_us, threshold)
        if b > at_us:
            return True
        if what == "prune":
            return False
        apply_reinforcement(walk, reinforce(walk, b))
        checked_us = b
    return True

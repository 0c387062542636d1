"""Forgetting and remembering: the Ebbinghaus curve, reinforcement on retrieval, spaced repetition.

    S(t) = S0 · exp(−Δt / stability)     Δt = t − last access, in event time

A retrieval reinforces (constants and formula in `engram.config.defaults`): stability grows,
more for a weaker ("harder") memory and less as retrievals pile up; strength rises; the review
interval grows. The decay sweep (run by the Consolidator) soft-deletes what fell below 0.05.

The spacing effect. A retrieval strengthens a memory in proportion to how far into its review
interval it comes:

    spacing = min(1, Δt / interval)      Δt = time since the last access (retrieval, review or encoding)
    stability' = stability · (1 + gain · spacing)
    interval'  = interval · (1 + (growth − 1) · spacing)      (doubles only for a retrieval that was due)
    strength boost only when the review was due (t >= next due)

A retrieval at or after the trace's due time (spaced practice) earns the full gain and doubles the
interval; one in quick succession after another (massed practice) earns almost nothing: its Δt is a
tiny share of the interval. Every retrieval still resets the decay clock (strength is back to at least
S0). Bound: since the interval is at least an hour, recalls of one trace within one minute add at most
Σ Δt / interval <= 1/60 of a spacing, so their stabilities multiply by at most exp(max gain / 60) < 1.06,
however many there are (before this rule, ten recalls in ten seconds took a trace from 1 h of stability
to 1,420 h and its interval to 1,024 h).

Sources: the spacing effect (Ebbinghaus, "Über das Gedächtnis", 1885; Cepeda, Pashler, Vul, Wixted &
Rohrer, "Distributed practice in verbal recall tasks", Psychological Bulletin 132(3), 2006); stability
growth that depends on when the repetition comes (Wozniak & Gorzelanczyk, "Optimization of repetition
spacing in the practice of learning", Acta Neurobiologiae Experimentalis 54, 1994: the SuperMemo model
of memory stability and retrievability, where a repetition before the optimal interval increases
stability little).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from engram.config import defaults as d
from engram.events.cognitive import TracePruned
from engram.memory.cognitive.model import MemoryTrace, US_PER_S


def ebbinghaus(s0: float, elapsed_s: float, stability_s: float) -> float:
    """S0 · exp(−Δt / stability); no decay for Δt <= 0."""
    return s0 * math.exp(-max(0.0, elapsed_s) / stability_s)


def strength_at(trace: MemoryTrace, now_us: int) -> float:
    """The trace's current strength at event time `now_us`."""
    return ebbinghaus(trace.encoding_strength, (now_us - trace.last_access_us) / US_PER_S, trace.stability_s)


def recency(age_s: float, half_life_hours: float = d.RECENCY_HALF_LIFE_HOURS) -> float:
    """A true half-life: 1 now, 0.5 after one half-life (24 h), 0.25 after two."""
    return float(0.5 ** (max(0.0, age_s) / (half_life_hours * 3_600.0)))


@dataclass(frozen=True)
class Reinforcement:
    """A trace's decay and review state after one successful retrieval at `at_us`."""

    strength_before: float  # S(t) just before: what the retrieval found
    encoding_strength: float
    stability_s: float
    interval_s: float
    next_due_us: int
    at_us: int


def spacing(trace: MemoryTrace, at_us: int) -> float:
    """How spaced a retrieval at `at_us` is: the share of the review interval since the last access, at most 1."""
    if trace.interval_s <= 0:
        return 1.0
    return max(0.0, min(1.0, (at_us - trace.last_access_us) / US_PER_S / trace.interval_s))


def reinforce(trace: MemoryTrace, at_us: int) -> Reinforcement:
    """Reinforcement of `trace` by a retrieval at `at_us` (desirable difficulty, diminishing returns, spacing)."""
    current = strength_at(trace, at_us)
    due = at_us >= trace.next_due_us  # the review was due: a spaced retrieval earns the strength boost
    spaced = spacing(trace, at_us)
    difficulty = max(d.MIN_DIFFICULTY, 1.0 - min(1.0, current))
    gain = (
        (d.STABILITY_GAIN_BASE + d.STABILITY_GAIN_DIFFICULTY * difficulty)
        * (1.0 + d.EMOTIONAL_CONSOLIDATION * trace.intensity)
        / (1.0 + d.STABILITY_GAIN_DIMINISH * trace.retrieval_count)
    )
    growth = 1.0 + (d.REINFORCEMENT_INTERVAL_GROWTH - 1.0) * spaced
    interval = min(d.MAX_REINFORCEMENT_INTERVAL_S, max(trace.interval_s, trace.interval_s * growth))
    return Reinforcement(
        strength_before=current,
        encoding_strength=max(
            trace.encoding_strength,
            min(d.REINFORCED_STRENGTH_CAP, current + (d.REINFORCEMENT_STRENGTH_BOOST if due else 0.0)),
        ),
        stability_s=trace.stability_s * (1.0 + gain * spaced),
        interval_s=interval,
        next_due_us=at_us + int(interval * US_PER_S),
        at_us=at_us,
    )


def apply_reinforcement(trace: MemoryTrace, r: Reinforcement) -> None:
    trace.encoding_strength = r.encoding_strength
    trace.stability_s = r.stability_s
    trace.interval_s = r.interval_s
    trace.next_due_us = r.next_due_us
    trace.last_access_us = r.at_us
    trace.retrieval_count += 1


def prunable(trace: MemoryTrace, now_us: int, threshold: float = d.PRUNE_STRENGTH) -> bool:
    return trace.active and strength_at(trace, now_us) < threshold


def decay_sweep(
    traces: Iterable[MemoryTrace],
    now_us: int,
    *,
    threshold: float = d.PRUNE_STRENGTH,
    max_traces: int = d.DECAY_SWEEP_MAX_TRACES,
) -> list[TracePruned]:
    """The Consolidator's first step: a `TracePruned` for each active trace below `threshold` at `now_us`.

    Weakest first, at most `max_traces` (a bounded run); ties by trace id, so a sweep is deterministic.
    """
    weak = [(strength_at(t, now_us), t.trace_id) for t in traces if prunable(t, now_us, threshold)]
    weak.sort()
    return [TracePruned(trace_id=tid, strength=round(s, 6), reason="decay") for s, tid in weak[:max_traces]]


def due_for_review(traces: Iterable[MemoryTrace], now_us: int, *, limit: int | None = None) -> list[MemoryTrace]:
    """Active traces whose spaced-repetition review is due at `now_us`, most overdue first."""
    due = sorted((t for t in traces if t.active and t.next_due_us <= now_us), key=lambda t: (t.next_due_us, t.trace_id))
    return due if limit is None else due[:limit]

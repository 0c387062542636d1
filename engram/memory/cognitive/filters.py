"""Which traces a recall may return beyond its scope: a user's filter (kind, time range, metadata equality).

A recall asks the filter inside every search it makes (vector, keyword, HyDE, spreading activation, the dormant
stage), so a filtered recall ranks the traces that pass, never the few that survive a cut of the unfiltered top.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.memory.cognitive.model import MemoryTrace


@dataclass(frozen=True)
class TraceFilter:
    kinds: frozenset[str] = frozenset()  # a trace's type (episodic, semantic, …) or category (a fact's, "lesson", …)
    since_us: int | None = None  # encoded at or after
    until_us: int | None = None  # encoded before
    metadata: tuple[tuple[str, str], ...] = ()  # every pair equal in the trace's metadata

    def admits(self, t: MemoryTrace) -> bool:
        if self.kinds and t.trace_type not in self.kinds and t.category not in self.kinds:
            return False
        if self.since_us is not None and t.encoded_us < self.since_us:
            return False
        if self.until_us is not None and t.encoded_us >= self.until_us:
            return False
        if self.metadata:
            own = dict(t.metadata)
            return all(own.get(k) == v for k, v in self.metadata)
        return True

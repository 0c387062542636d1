"""An agent's traces and trace graph as the Reflector and the Consolidator need them: folded from the
log with `TraceBook`, plus the entity and per-discussion bookkeeping that linking uses, without the
HNSW index (they link by entities and time, so they embed nothing to keep up)."""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Iterable

from engram.cognitive.book import TraceBook
from engram.cognitive.memory import ENTITY_MEMORY, entity_key
from engram.events.envelope import Recorded


def _queue() -> deque:
    return deque(maxlen=ENTITY_MEMORY)


class TraceFold:
    def __init__(self, agent: str):
        self.agent = agent
        self.book = TraceBook(agent)
        self.by_entity: dict[str, deque[str]] = defaultdict(_queue)
        self.last_in_stream: dict[str, tuple[str, int]] = {}  # stream -> (trace id, encoded at)

    def apply(self, rec: Recorded) -> None:
        applied = self.book.apply(rec)
        for t in applied.added:
            for name in t.entities:
                q = self.by_entity[entity_key(name)]
                if t.trace_id not in q:
                    q.append(t.trace_id)
            last = self.last_in_stream.get(t.stream)
            if last is None or (t.encoded_us, t.trace_id) >= (last[1], last[0]):
                self.last_in_stream[t.stream] = (t.trace_id, t.encoded_us)
        for tid in applied.forgotten:
            for q in self.by_entity.values():
                if tid in q:
                    q.remove(tid)
            for stream, (last, _) in list(self.last_in_stream.items()):
                if last == tid:
                    del self.last_in_stream[stream]

    def recent_with_entities(self, entities: Iterable[str], exclude: str = "") -> list[str]:
        """Active traces naming one of `entities`, most recent first."""
        seen, out = set(), []
        for name in entities:
            for tid in reversed(self.by_entity.get(entity_key(name), ())):
                t = self.book.traces.get(tid)
                if tid != exclude and tid not in seen and t is not None and t.active:
                    seen.add(tid)
                    out.append(tid)
        return out

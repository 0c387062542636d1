"""An agent's traces and trace graph as the Reflector and the Consolidator need them: folded from the
log with `TraceBook`, plus the entity and per-discussion bookkeeping that linking uses, without the
HNSW index (they link by entities and time, so they embed nothing to keep up)."""

from __future__ import annotations

import bisect
from collections import defaultdict, deque
from typing import Any, Iterable

from engram.events.envelope import Recorded
from engram.memory.cognitive.book import TraceBook
from engram.memory.cognitive.model import MemoryTrace
from engram.memory.cognitive.memory import ENTITY_MEMORY, EntityLinks, _entity_queue, entity_key
from engram.providers.search.bm25 import TOKENIZER_VERSION, tokenize

_queue = _entity_queue  # the name saved policy state (pickles) refer to


def words_of(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))


class TraceFold(EntityLinks):
    def __init__(self, agent: str):
        self.agent = agent
        self.book = TraceBook(agent)
        self.by_entity: dict[str, deque[str]] = defaultdict(_queue)
        self.last_in_stream: dict[str, tuple[str, int]] = {}  # stream -> (trace id, encoded at)
        self.by_words: dict[frozenset[str], str] = {}  # a trace's words (BM25 tokens) -> the latest trace saying them
        self.tokenizer = TOKENIZER_VERSION
        # Per entity, (encoded, trace) of every trace naming it, in event-time order (`named_at`).
        self.by_entity_time: dict[str, list[tuple[int, str]]] = {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "by_entity_time" not in state:
            self.by_entity_time = {}
            for t in self.book.traces.values():
                self._index_time(t)
        if state.get("tokenizer") != TOKENIZER_VERSION:  # saved before the word index, or with another tokenizer
            self.by_words = {words_of(t.content): tid for tid, t in self.book.traces.items()}
            self.tokenizer = TOKENIZER_VERSION

    def apply(self, rec: Recorded) -> None:
        applied = self.book.apply(rec)
        for t in applied.added:
            self._link_entities(t)
            self._index_time(t)
            self.by_words[words_of(t.content)] = t.trace_id
            last = self.last_in_stream.get(t.stream)
            if last is None or (t.encoded_us, t.trace_id) >= (last[1], last[0]):
                self.last_in_stream[t.stream] = (t.trace_id, t.encoded_us)
        for tid in applied.forgotten:
            self._unlink(tid)
        if applied.forgotten:
            gone = set(applied.forgotten)
            self.by_words = {w: tid for w, tid in self.by_words.items() if tid not in gone}
            self.by_entity_time = {k: [x for x in v if x[1] not in gone] for k, v in self.by_entity_time.items()}

    def _index_time(self, t: MemoryTrace) -> None:
        for name in dict.fromkeys(entity_key(e) for e in t.entities):
            bisect.insort(self.by_entity_time.setdefault(name, []), (t.encoded_us, t.trace_id))

    def named_at(self, entities: Iterable[str], at_us: int, exclude: str = "", limit: int = ENTITY_MEMORY) -> list[str]:
        """The traces naming one of `entities` that were active at event time `at_us`, the `limit` most recent per
        entity by event time (what `recent_with_entities` would have answered at `at_us` had the traces arrived in
        time order): the same whatever order they reached the log in."""
        seen, out = set(), []
        for name in dict.fromkeys(entity_key(e) for e in entities):
            timeline = self.by_entity_time.get(name, ())
            k, n = bisect.bisect_right(timeline, (at_us, "\uffff")), 0
            while k > 0 and n < limit:
                k -= 1
                tid = timeline[k][1]
                t = self.book.traces.get(tid)
                if t is None or not (t.active or (t.deleted_us is not None and t.deleted_us > at_us)):
                    continue
                n += 1
                if tid != exclude and tid not in seen:
                    seen.add(tid)
                    out.append(tid)
        return out

"""An agent's traces and trace graph as the Reflector and the Consolidator need them: folded from the
log with `TraceBook`, plus the entity and per-discussion bookkeeping that linking uses, without the
HNSW index (they link by entities and time, so they embed nothing to keep up)."""

from __future__ import annotations

from collections import defaultdict, deque

from engram.cognitive.book import TraceBook
from engram.cognitive.memory import EntityLinks, _entity_queue
from engram.events.envelope import Recorded
from engram.search.bm25 import TOKENIZER_VERSION, tokenize

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

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if state.get("tokenizer") != TOKENIZER_VERSION:  # saved before the word index, or with another tokenizer
            self.by_words = {words_of(t.content): tid for tid, t in self.book.traces.items()}
            self.tokenizer = TOKENIZER_VERSION

    def apply(self, rec: Recorded) -> None:
        applied = self.book.apply(rec)
        for t in applied.added:
            self._link_entities(t)
            self.by_words[words_of(t.content)] = t.trace_id
            last = self.last_in_stream.get(t.stream)
            if last is None or (t.encoded_us, t.trace_id) >= (last[1], last[0]):
                self.last_in_stream[t.stream] = (t.trace_id, t.encoded_us)
        for tid in applied.forgotten:
            self._unlink(tid)
        if applied.forgotten:
            gone = set(applied.forgotten)
            self.by_words = {w: tid for w, tid in self.by_words.items() if tid not in gone}

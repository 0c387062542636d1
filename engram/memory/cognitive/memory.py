"""One agent's memory as the readers of the log see it: the trace book plus its HNSW index.

`AgentMemory` folds events with `TraceBook` and keeps beside it what search needs: an HNSW index
of the active traces' embeddings (items added single-threaded, one by one, in log order, so the
index bytes are reproducible), a keyword (BM25) index of the same traces (`engram.memory.cognitive.lexical`,
the lexical half of hybrid similarity), the most recent traces naming each entity, and the last
trace of each discussion. Both indexes change with the same events and hold the same text per trace
(`engram.memory.cognitive.indexing`: its content, the question it answers, its day). The embedder is
injected (`embed(texts) -> (n, dim) float32, L2-normalised`).

The HNSW index holds each trace's vector made of the embeddings of its content and of the question it
answers (`engram.memory.cognitive.indexing.vector_parts` and `combine`). `content_vectors=True` makes it hold embeddings of the content
alone: the question auto-ingest asks it ("is this the same memory, the same topic?") is about what a
memory says, not about when it was said or what it answered — a fact restated a month later is still a
duplicate. Such a memory serves no recall, so it keeps no keyword index (`lexical` is None), and it keeps
soft-deleted traces in its index: whether one was still alive when a message was said is a question
of event time (`engram.memory.background.schedule.alive_at`), not of when consolidation recorded it.
`VECTOR_TEXT` names what the vectors of an index are made of: a memory restored from a snapshot made
with other vectors embeds its traces again (`reembed`).

Dormant traces (`dormant=True`, the recall reader's memory): a trace pruned because it decayed below the
prune threshold (the guide's decay sweep, `TracePruned` with reason "decay") is soft-deleted, not erased:
it leaves the active indexes, and its vector and keyword entry move to a second pair of indexes
(`dormant_index`, `dormant_lexical`) that only recall's dormant stage searches
(`engram.memory.cognitive.retrieval`, step 8). Traces retired for another reason (a restatement of an earlier
trace, a correction's loser) are not dormant: what replaced them holds what they said. Forgetting a
discussion or an agent removes its dormant traces too.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any, Callable, Iterable

import numpy as np

from engram.config import defaults as d
from engram.events.cognitive import TraceEncoded
from engram.events.envelope import Recorded
from engram.memory.cognitive.book import Applied, TraceBook
from engram.memory.cognitive.indexing import combine, index_text, vector_parts
from engram.memory.cognitive.lexical import LexicalIndex
from engram.memory.cognitive.model import MemoryTrace
from engram.providers.search.hnsw import HnswIndex

Embed = Callable[[list[str]], np.ndarray]

# What the index vectors are embeddings of (see the module docstring); a snapshot with another value
# (or none: "index text", when the day was embedded too) is embedded again on restore.
VECTOR_TEXT = "content,context"

# Traces remembered per entity for shared-entity links (the most recent ones are linked).
ENTITY_MEMORY = 16


def _entity_queue() -> deque[str]:
    return deque(maxlen=ENTITY_MEMORY)


def entity_key(name: str) -> str:
    return " ".join(name.lower().split())


class EntityLinks:
    """What linking looks up beside a trace book: the most recent traces naming each entity
    (`by_entity`) and the latest trace of each stream (`last_in_stream`)."""

    book: TraceBook
    by_entity: dict[str, deque[str]]
    last_in_stream: dict[str, tuple[str, int]]

    def _link_entities(self, t: MemoryTrace) -> None:
        for name in t.entities:
            q = self.by_entity[entity_key(name)]
            if t.trace_id not in q:
                q.append(t.trace_id)

    def _unlink(self, tid: str) -> None:
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


class AgentMemory(EntityLinks):
    def __init__(
        self, agent: str, dim: int, *, track: bool = False, index: HnswIndex | None = None, content_vectors: bool = False,
        dormant: bool = False,
    ):
        self.agent = agent
        self.dim = dim
        self.content_vectors = content_vectors
        self.book = TraceBook(agent, track=track)
        self.index = index or HnswIndex(dim)
        self.lexical: LexicalIndex | None = None if content_vectors else LexicalIndex()
        self.by_entity: dict[str, deque[str]] = defaultdict(_entity_queue)
        self.last_in_stream: dict[str, tuple[str, int]] = {}  # stream -> (trace id, encoded at)
        # message id -> the traces made from replies to it (their context_message_ids): a question's answers
        self.answers: dict[str, list[str]] = defaultdict(list)
        self.index_seq = 0  # seq of the last event that changed the index
        self.vector_text = VECTOR_TEXT
        # Decay-pruned traces, searchable apart (see the module docstring); None when this memory keeps none.
        self.dormant_index: HnswIndex | None = HnswIndex(dim) if dormant and not content_vectors else None
        self.dormant_lexical: LexicalIndex | None = LexicalIndex() if self.dormant_index is not None else None

    def embedded_parts(self, content: str, context: str) -> tuple[str, ...]:
        """The texts whose embeddings make this memory's vector of a trace (`engram.memory.cognitive.indexing.combine`)."""
        return (content,) if self.content_vectors else vector_parts(content, context)

    def vectors_of(self, pairs: list[tuple[str, str]], embed: Embed) -> list[np.ndarray]:
        """This memory's vectors of traces given as (content, context), the distinct texts embedded in one call."""
        parts = [self.embedded_parts(content, context) for content, context in pairs]
        texts = list(dict.fromkeys(t for p in parts for t in p))
        if not texts:
            return []
        row = {t: k for k, t in enumerate(texts)}
        embedded = np.asarray(embed(texts), dtype=np.float32)
        return [combine(embedded[[row[t] for t in p]]) for p in parts]

    def apply_batch(self, recs: Iterable[Recorded], embed: Embed) -> list[Applied]:
        """Fold `recs` in seq order; new traces are embedded in one call, the index follows event by event."""
        recs = list(recs)
        texts = {
            r.event.trace_id: (r.event.content, r.event.context)
            for r in recs
            if isinstance(r.event, TraceEncoded) and r.event.trace_id not in self.book.traces
        }
        ids = list(texts)
        vectors = dict(zip(ids, self.vectors_of([texts[i] for i in ids], embed))) if ids else {}
        out = []
        for rec in recs:
            applied = self.book.apply(rec)
            for t in applied.added:
                self._index_trace(t, vectors[t.trace_id], rec.seq)
            for t in applied.edited:
                self._reindex_trace(t, self.vectors_of([(t.content, t.context)], embed)[0], rec.seq)
            for tid in applied.removed:
                if self.lexical is not None:
                    self.lexical.remove(tid)
                if self.content_vectors and tid not in applied.forgotten:
                    continue  # kept: see the module docstring
                if tid not in applied.forgotten:
                    self._to_dormant(tid)
                if tid in self.index:
                    self.index.remove(tid)
                    self.index_seq = rec.seq
            if applied.forgotten:
                gone = set(applied.forgotten)
                for tid in applied.forgotten:
                    self._unlink(tid)
                for m in [m for m, tids in self.answers.items() if gone.intersection(tids)]:
                    self.answers[m] = [tid for tid in self.answers[m] if tid not in gone]
                    if not self.answers[m]:
                        del self.answers[m]
                self._rebuild_index(rec.seq)
            out.append(applied)
        return out

    def _rebuild_index(self, seq: int) -> None:
        """A fresh index of the active traces, in encoding order: forgotten vectors leave the file too (the
        dormant index's as well)."""
        keep = [tid for tid, t in self.book.traces.items() if (t.active or self.content_vectors) and tid in self.index]
        vectors = self.index.vectors(keep) if keep else np.zeros((0, self.dim), dtype=np.float32)
        self.index = HnswIndex(self.dim)
        for k, tid in enumerate(keep):
            self.index.add([tid], vectors[k : k + 1])
        self.index_seq = seq
        if self.dormant_index is not None:
            old = self.dormant_index
            kept = [tid for tid in self.book.traces if tid in old]
            self.dormant_index = HnswIndex(self.dim)
            if kept:
                self.dormant_index.add(kept, old.vectors(kept))
            dormant_lexical = self.dormant_lexical
            assert dormant_lexical is not None  # kept with the dormant index
            for key in [k for k in dormant_lexical.bm25.keys() if k not in self.book.traces]:
                dormant_lexical.remove(key)

    @staticmethod
    def is_dormant(t: MemoryTrace) -> bool:
        """Soft-deleted, and still worth finding: because it faded (the decay sweep), or because a newer trace
        replaced it (superseded: `valid_to_us` set; it answers what was true before, `as_of`)."""
        return not t.active and (t.deleted_reason == "decay" or t.valid_to_us is not None)

    def _to_dormant(self, tid: str) -> None:
        """A trace just pruned for decay: its vector and keyword entry move to the dormant indexes."""
        t = self.book.traces.get(tid)
        if self.dormant_index is None or t is None or not self.is_dormant(t) or tid not in self.index:
            return
        self.dormant_index.add([tid], self.index.vectors([tid]))
        assert self.dormant_lexical is not None  # kept with the dormant index
        self.dormant_lexical.add(tid, indexed_text(t))

    def reembed(self, embed: Embed) -> None:
        """Embed the indexed traces again (in one call, in index order) and rebuild the index with them:
        for a memory restored with vectors of another `vector_text`. Dormant traces too, when kept."""
        keep = [tid for tid, t in self.book.traces.items() if t.active and tid in self.index]
        self.index = HnswIndex(self.dim)
        traces = self.book.traces
        if keep:
            vectors = np.stack(self.vectors_of([(traces[t].content, traces[t].context) for t in keep], embed))
            for k, tid in enumerate(keep):
                self.index.add([tid], vectors[k : k + 1])
        if self.dormant_index is not None:
            dormant = [tid for tid in traces if tid in self.dormant_index]
            self.dormant_index = HnswIndex(self.dim)
            if dormant:
                self.dormant_index.add(dormant, np.stack(
                    self.vectors_of([(traces[t].content, traces[t].context) for t in dormant], embed)))
        self.vector_text = VECTOR_TEXT

    def _index_trace(self, t: MemoryTrace, vector: np.ndarray, seq: int) -> None:
        if t.trace_id not in self.index:
            self.index.add([t.trace_id], np.asarray(vector, dtype=np.float32).reshape(1, self.dim))
            self.index_seq = seq
        if self.lexical is not None:
            self.lexical.add(t.trace_id, indexed_text(t))
        self._link_entities(t)
        self._link_answer(t)
        self.last_in_stream[t.stream] = (t.trace_id, t.encoded_us)

    def _link_answer(self, t: MemoryTrace) -> None:
        for m in t.context_message_ids:
            if t.trace_id not in self.answers[m]:
                self.answers[m].append(t.trace_id)

    def _reindex_trace(self, t: MemoryTrace, vector: np.ndarray, seq: int) -> None:
        """A trace whose text was edited: its keyword entry and vector are the new text's. The index is built afresh
        (in the same order, the new vector in the old one's place): an index keeps an id's first vector for ever."""
        if self.lexical is not None and t.active:
            self.lexical.remove(t.trace_id)
            self.lexical.add(t.trace_id, indexed_text(t))
        if t.trace_id not in self.index:
            return
        keep = [tid for tid in self.index.ids if tid in self.index]
        vectors = self.index.vectors(keep)
        vectors[keep.index(t.trace_id)] = np.asarray(vector, dtype=np.float32).reshape(self.dim)
        self.index = HnswIndex(self.dim)
        for k, tid in enumerate(keep):
            self.index.add([tid], vectors[k : k + 1])
        self.index_seq = seq

    def restore_lexical(self) -> None:
        """The keyword index of the active traces, from the book (after loading traces from tables or an old snapshot)."""
        if self.content_vectors:
            self.lexical = None
            return
        self.lexical = LexicalIndex()
        for tid, t in self.book.traces.items():
            if t.active:
                self.lexical.add(tid, indexed_text(t))
        if self.dormant_index is not None:
            self.dormant_lexical = LexicalIndex()
            for tid, t in self.book.traces.items():
                if tid in self.dormant_index:
                    self.dormant_lexical.add(tid, indexed_text(t))

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("content_vectors", False)
        self.__dict__.setdefault("vector_text", "index text")  # from before VECTOR_TEXT: the day was embedded too
        self.__dict__.setdefault("dormant_index", None)  # from before dormant traces: none kept
        self.__dict__.setdefault("dormant_lexical", None)
        if "answers" not in state:  # a snapshot from before the answer link: made from the book, as the fold makes it
            self.answers = defaultdict(list)
            for t in self.book.traces.values():
                self._link_answer(t)
        lexical = state.get("lexical", False)
        if lexical is False or (lexical is not None and not lexical.bm25.current):
            self.restore_lexical()  # a snapshot from before the keyword index, or from another tokenizer

    # ------------------------------------------------------------------ questions the policies ask

    def answers_of(self, tid: str) -> list[str]:
        """The traces made from replies to the message(s) trace `tid` was made from: what answered it (a question's
        reply carries the question as its context, `context_message_ids`). Forgotten traces left out."""
        t = self.book.traces.get(tid)
        if t is None:
            return []
        out = [a for m in t.source_message_ids for a in self.answers.get(m, ()) if a != tid and a in self.book.traces]
        return list(dict.fromkeys(out))

    def nearest(self, vector: np.ndarray, k: int, allowed: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        if allowed is None:
            traces = self.book.traces

            def allowed(tid: str) -> bool:
                t = traces.get(tid)
                return t is not None and t.active

        # A filtered search calls `allowed` from the index for every node it visits (hundreds per search);
        # usually the nearest are all allowed, which k calls tell: only otherwise is the search filtered.
        found = self.index.search(vector, k)
        if len(found) == min(k, len(self.index)) and all(allowed(tid) for tid, _ in found):
            return found
        return self.index.search(vector, k, allowed)



def indexed_text(t: MemoryTrace) -> str:
    """What the keyword index holds for a trace: the text its embedding is made of (engram.memory.cognitive.indexing)."""
    return index_text(t.content, t.context, t.encoded_us)


def temporal_window_us() -> int:
    return int(d.TEMPORAL_EDGE_WINDOW_S * 1_000_000)

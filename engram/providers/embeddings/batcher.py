"""Concurrent embedding requests coalesced into full model batches (the home's embedder service).

Every shard and policy actor of a home asks the one EmbedderActor for vectors, each request with a
few texts (a chunk's memories, a turn's facts, the traces of a fold). Served one at a time, each
request pays its own cache lookup and runs the model on part-filled batches. `EmbedBatcher` does for
embeddings what the event store's group commit does for appends: whichever caller finds the model
idle becomes the leader and embeds everything queued meanwhile, up to `max_texts`, in one call of
the (cached) embedder — one cache lookup, a text asked for by two requests computed once, full ONNX
batches across agents and discussions — and every caller gets its own rows back.

A request whose texts are all in the cache (the embedder's `cached`) is answered at once, on the
caller's thread, without queueing: most requests of a home are of texts another actor had embedded
already (the trace index of the shard and of the reader, the consolidator, after auto-ingest), and
such a request must not wait behind a model round of other texts.

In-flight work is bounded: at most `max_waiting` texts wait at once; a request that does not fit
waits for room (back-pressure on its caller), so a burst of requests cannot grow memory unboundedly.
A request larger than `max_waiting` is admitted alone. Plain class (threads, no Ray): the actor runs
it with several concurrent calls (`EmbedderActor`'s max_concurrency).
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from engram.providers.embeddings.base import Embedder, WrappingEmbedder

# Texts one leader embeds at once: large enough for full batches from many small requests,
# small enough that a request arriving meanwhile waits for at most about a second of model time.
MAX_TEXTS_PER_ROUND = 256
# Texts that may wait at once before callers are held back.
MAX_WAITING_TEXTS = 4_096


class _Request:
    __slots__ = ("texts", "result", "error", "done")

    def __init__(self, texts: list[str]):
        self.texts = texts
        self.result: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False


class EmbedBatcher(WrappingEmbedder):
    def __init__(self, embedder: Embedder, *, max_texts: int = MAX_TEXTS_PER_ROUND, max_waiting: int = MAX_WAITING_TEXTS):
        self.embedder = embedder
        self.max_texts = max_texts
        self.max_waiting = max_waiting
        self._cond = threading.Condition()
        self._queue: list[_Request] = []
        self._waiting = 0  # texts queued, not yet taken by a leader
        self._computing = False
        self.requests = 0  # embed() calls
        self.rounds = 0  # calls of the embedder (each serving one or more requests)
        self.most_waiting = 0  # the largest number of texts that waited at once
        self.served_from_cache = 0  # requests answered from the cache without queueing

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        cached = getattr(self.embedder, "cached", None)
        if cached is not None:
            hit = cached(texts)
            if hit is not None:
                with self._cond:
                    self.requests += 1
                    self.served_from_cache += 1
                return hit
        request = _Request(list(texts))
        n = len(request.texts)
        with self._cond:
            self.requests += 1
            while self._waiting and self._waiting + n > self.max_waiting:
                self._cond.wait()  # back-pressure: room comes as leaders take requests
            self._queue.append(request)
            self._waiting += n
            self.most_waiting = max(self.most_waiting, self._waiting)
            while not request.done:
                if self._computing:
                    self._cond.wait()
                    continue
                self._computing = True
                batch = self._take()
                self._cond.notify_all()  # room for waiting callers
                self._cond.release()
                try:
                    self._run(batch)
                finally:
                    self._cond.acquire()
                    self._computing = False
                    self._cond.notify_all()
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _take(self) -> list[_Request]:
        taken: list[_Request] = []
        count = 0
        while self._queue and (not taken or count + len(self._queue[0].texts) <= self.max_texts):
            request = self._queue.pop(0)
            taken.append(request)
            count += len(request.texts)
        self._waiting -= count
        return taken

    def _run(self, batch: list[_Request]) -> None:
        self.rounds += 1
        texts = [t for r in batch for t in r.texts]
        try:
            vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        except BaseException as exc:  # every request of the round fails alike; callers may retry
            for r in batch:
                r.error, r.done = exc, True
            return
        start = 0
        for r in batch:
            r.result = vectors[start : start + len(r.texts)]
            start += len(r.texts)
            r.done = True

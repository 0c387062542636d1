"""A new generation of a shard's projections, built beside the live one while the shard goes on serving.

`engram reindex` changes the embedder every vector was made by. The live projections keep folding and serving with
the old embedder (reads, and appends: nothing is held) while the new generation is replayed from the log into a
scratch directory with the new one, in steps the runtime drives (`open_generation`, then `advance_generation` up to
a fixed position: first the head as it was when the build began, then, round after round, the head as it has moved
meanwhile). Only when the generation is close behind the head does the runtime hold appends, for the last short
catch-up (`finish_generation`), which marks the generation ready for the embedder it was built with. The runtime
then records that embedder as the home's (the switch), and a shard that opens with it takes the ready generation in
place of its projections (`_adopt_generation`, before it opens them).

At a start, a generation that is not ready, or was made for an embedder the home does not serve with (a reindex that
crashed, failed or was stopped before its switch), is discarded: the old generation keeps serving. One interrupted
half-way through its adoption (neither directory is whole any more) is replaced by a rebuild from the log.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import duckdb
import numpy as np

from engram.config.home import ProjectionPaths
from engram.config.serving_embedder import embedder_key
from engram.events.envelope import Recorded
from engram.kernel.files import atomic_write
from engram.projections.base import ProjectionContext
from engram.projections.registry import build_projections
from engram.projections.runner import ProjectionRunner
from engram.providers.embeddings.base import Embedder, WrappingEmbedder
from engram.shard.base import ShardBase

log = logging.getLogger(__name__)

# Events a step folds at most: the runtime reports progress after each step, and no call runs long.
GENERATION_STEP = 2_000
# A long replay checkpoints the generation every this many events (its resident memories are then let go), as a
# replay does (`ProjectionRunner.catch_up`'s default).
GENERATION_CHECKPOINT_EVENTS = 200_000
# The marker of a finished generation: {"key": the embedder's key, "position": its last event, "state": ...}.
READY_MARKER = "GENERATION-READY.json"


class _EmbedderFailed(BaseException):
    """The new embedder failed while the generation folded. A BaseException, so that the runner does not take it for
    one event's fault and quarantine the event (as it does in the live projections): a generation with holes must
    never be made ready. It never leaves this module (`_Generation.fold` raises it as a RuntimeError)."""


class _Stopping(WrappingEmbedder):
    """The generation's embedder: its first failure stops the step."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        try:
            return self.embedder.embed(texts)
        except Exception as exc:
            raise _EmbedderFailed(f"{type(exc).__name__}: {exc}") from None


class _Generation:
    """The projections of one shard in a scratch directory, folded by their own runner and DuckDB connection."""

    def __init__(self, root: Path, shard: int, services: dict[str, Any], read: Callable[..., list[Recorded]]):
        self.paths = ProjectionPaths(root)
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.db = duckdb.connect(str(self.paths.shard_db(shard)))
        ctx = ProjectionContext(shard=shard, paths=self.paths, db=self.db, services=services)
        self.runner = ProjectionRunner(build_projections(ctx), read)
        self.folded = 0  # events folded into it so far
        self.unsaved = 0  # of which not checkpointed
        self.void = ""  # why it may no longer be used (the log was rewritten under it)
        self.closed = False
        self.lock = threading.Lock()  # one step at a time

    def fold(self, to_seq: int) -> int:
        if self.void:
            raise RuntimeError(self.void)
        try:
            n = self.runner.catch_up(to_seq=to_seq, checkpoint=False)
        except _EmbedderFailed as exc:
            self.void = f"the new embedder failed while the new generation was built, which is discarded: {exc}"
            raise RuntimeError(self.void) from None
        self.folded += n
        self.unsaved += n
        if self.unsaved >= GENERATION_CHECKPOINT_EVENTS:
            self.runner.checkpoint()
            self.unsaved = 0
        return n

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.runner.close()
            finally:
                self.db.close()


class ShardGenerations(ShardBase):
    """A new generation of the projections built while the shard serves (a part of `ShardHost`)."""

    _generation: _Generation | None = None

    @property
    def _generation_dir(self) -> Path:
        return self.paths.root.parent / f".{self.paths.root.name}.generation-{self.shard:03d}"

    def open_generation(self, embedder: Embedder) -> dict[str, Any]:
        """Begin a new generation of this shard's projections whose vectors `embedder` makes (from position 0, in a
        scratch directory); the live projections go on serving. A generation begun before is dropped."""
        self.discard_generation()
        services = dict(self.services, embedder=_Stopping(embedder))
        # Each step reads the log through the gate, a batch at a time: a change that has the shard alone (a forget)
        # waits for one read, not for a whole step, and the step's next read waits for it.
        self._generation = _Generation(self._generation_dir, self.shard, services, self.read)
        return {"shard": self.shard, "position": 0, "head": self.store.head()}

    def advance_generation(self, max_events: int, to_seq: int) -> dict[str, Any]:
        """Fold at most `max_events` more events into the generation, none past `to_seq`. Appends go on."""
        gen = self._building()
        with self._step(gen):
            gen.fold(min(to_seq, gen.runner.position + max_events))
            position = gen.runner.position
        return {"shard": self.shard, "position": position, "head": self.store.head(), "events": gen.folded}

    def finish_generation(self, key: str) -> dict[str, Any]:
        """The last catch-up, to the head (the caller holds appends meanwhile): the generation is checkpointed,
        closed and marked ready for the embedder `key` (`engram.config.serving_embedder.embedder_key`)."""
        gen = self._building()
        with self._step(gen):
            head = self.store.head()
            held = gen.fold(head)
            gen.runner.checkpoint()
            position = gen.runner.position
            gen.close()
            self._generation = None
            atomic_write(self._generation_dir / READY_MARKER,
                         json.dumps({"key": key, "position": position, "state": "ready"}).encode())
        return {"shard": self.shard, "events": gen.folded, "held_events": held, "position": position}

    def discard_generation(self) -> None:
        """Drop the generation being built (its files too); the live projections are untouched."""
        gen, self._generation = self._generation, None
        if gen is not None:
            gen.void = gen.void or "the new generation was discarded"
            with gen.lock:
                gen.close()
        shutil.rmtree(self._generation_dir, ignore_errors=True)

    @contextmanager
    def _step(self, gen: _Generation) -> Iterator[None]:
        """One step on the generation; one that ends voided (see `_void_generation`) lets go of its connection."""
        with gen.lock:
            try:
                yield
            finally:
                if gen.void:
                    gen.close()

    def _building(self) -> _Generation:
        gen = self._generation
        if gen is None:
            raise RuntimeError(f"shard {self.shard} builds no new generation of its projections (open_generation first)")
        if gen.void:
            raise RuntimeError(gen.void)
        return gen

    def _void_generation(self, why: str) -> None:
        """A change rewrote the log (a forget, agents moving out): a generation being built folded what is no longer
        there, so it may not be finished. Its next step fails with `why`; its files go then (or at the next start)."""
        gen = self._generation
        if gen is not None:
            gen.void = why
            if gen.lock.acquire(blocking=False):  # not inside a step: let go of its connection now
                try:
                    gen.close()
                finally:
                    gen.lock.release()

    def _close_generation(self) -> None:
        """The shard closes: a generation being built lets go of its connection (its files stay until the next
        start, which discards them: it was never made ready)."""
        gen = self._generation
        if gen is not None:
            self._void_generation(gen.void or "the shard closed while its new generation was being built")
            self._generation = None

    # ------------------------------------------------------------------ at start

    def _serving_key(self) -> str | None:
        config = self.services.get("config")
        embedder = getattr(config, "embedder", None)
        return embedder_key(embedder) if embedder is not None else None

    def _adopt_generation(self) -> None:
        """At start, before the projections open: take a ready generation made for the embedder this shard serves
        with in place of the projections; discard any other (reported in `recovered`)."""
        folder = self._generation_dir
        if not folder.exists():
            return
        try:
            ready = json.loads((folder / READY_MARKER).read_bytes())
        except (OSError, ValueError):
            ready = None
        if ready is None or ready.get("key") != self._serving_key():
            shutil.rmtree(folder, ignore_errors=True)
            what = "unfinished" if ready is None else f"made for another embedder ({ready.get('key')})"
            log.warning("shard %s: discarded an %s new generation of the projections; the old one serves", self.shard,
                        what)
            self.recovered.append(f"discarded an {what} new generation of the projections (a reindex that did not "
                                  "reach its switch): the old generation serves")
            return
        if ready.get("state") == "adopting":  # interrupted half-way: neither directory is whole
            shutil.rmtree(folder, ignore_errors=True)
            self._rebuild_dir.mkdir(parents=True, exist_ok=True)  # `_finish_interrupted_work` rebuilds from the log
            return
        atomic_write(folder / READY_MARKER, json.dumps(dict(ready, state="adopting")).encode())
        for old in self._outputs(self.paths):
            shutil.rmtree(old) if old.is_dir() else old.unlink()
        for new in self._outputs(ProjectionPaths(folder)):
            target = self.paths.root / new.relative_to(folder)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(new, target)
        shutil.rmtree(folder, ignore_errors=True)
        log.info("shard %s: serving the new generation of its projections (embedder %s, through seq %s)", self.shard,
                 ready["key"], ready.get("position"))

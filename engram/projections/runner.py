"""Catching projections up with the log, in batches, from the lowest position among them."""

from __future__ import annotations

from typing import Callable, Sequence

from engram.events.envelope import Recorded
from engram.projections.base import Projection
from engram.timing import StageTimings


class ProjectionRunner:
    def __init__(self, projections: Sequence[Projection], read: Callable[..., list[Recorded]], *, batch: int = 20_000):
        self.projections = list(projections)
        self._read = read
        self.batch = batch
        # Positions as of the last checkpoint: what readers of the outputs can rely on (a
        # projection's `position` moves while it folds, before its files or rows are written).
        self.checkpointed: dict[str, int] = {p.name: p.position for p in self.projections}
        # Per projection: fold and checkpoint seconds, events folded; "(log)": reading the log.
        self.timings = StageTimings()

    @property
    def position(self) -> int:
        return min((p.position for p in self.projections), default=0)

    def catch_up(
        self, *, to_seq: int | None = None, until_us: int | None = None, checkpoint_every: int = 200_000,
        checkpoint: bool = True,
    ) -> int:
        """Apply every event after the lowest position (up to `to_seq`, and with ts <= `until_us`).

        Returns the number of events read. State and positions are checkpointed every
        `checkpoint_every` events, so a long replay can be interrupted and resumed, and at the end
        unless `checkpoint` is False (the live host then checkpoints when it is due).
        """
        after = self.position
        read = since_checkpoint = 0
        while True:
            with self.timings.measure("(log)", "read"):
                chunk = self._read(after, limit=self.batch, to_seq=to_seq, until_us=until_us)
            if not chunk:
                break
            self.timings.add("(log)", "events", len(chunk))
            for proj in self.projections:
                todo = chunk if chunk[0].seq > proj.position else [r for r in chunk if r.seq > proj.position]
                if todo:
                    with self.timings.measure(proj.name, "fold"):
                        proj.apply_batch(todo)
                    self.timings.add(proj.name, "events", len(todo))
            after = chunk[-1].seq
            read += len(chunk)
            since_checkpoint += len(chunk)
            if since_checkpoint >= checkpoint_every:
                self.checkpoint()
                since_checkpoint = 0
        if checkpoint:
            self.checkpoint()
        return read

    @property
    def unsaved(self) -> bool:
        """Whether some projection has folded events its last checkpoint does not hold."""
        return any(self.checkpointed.get(p.name) != p.position for p in self.projections)

    @property
    def durable_position(self) -> int:
        return min(self.checkpointed.values(), default=0)

    def checkpoint(self) -> None:
        for proj in self.projections:
            with self.timings.measure(proj.name, "checkpoint"):
                proj.checkpoint()
        self.checkpointed = {p.name: p.position for p in self.projections}

    def close(self) -> None:
        for proj in self.projections:
            proj.close()

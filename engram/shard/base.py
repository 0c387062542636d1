"""`ShardBase`: what the parts of a shard's host share (`engram.shard.host.ShardHost` is the parts over it).

The host is one class made of parts (queries, repair, moving, export, forget, generations), each in its own file. The
state they share, which `ShardHost.__init__` sets, and the few operations one part uses of another are declared here,
once, for the type checker; each operation is implemented in its own part (named beside it).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram.config.home import ProjectionPaths
from engram.events.store import EventStore
from engram.kernel.gate import Gate
from engram.projections.base import ProjectionContext
from engram.projections.runner import ProjectionRunner
from engram.sql import OwnSessions

if TYPE_CHECKING:
    from engram.events.envelope import Recorded


class ShardBase:
    """The state every part of `ShardHost` reads (set by `ShardHost.__init__` and `_open_projections`)."""

    shard: int
    gate: Gate  # calls run on many threads: a change that reopens the connections has the shard alone
    log_path: Path
    store: EventStore
    paths: ProjectionPaths
    services: dict[str, Any]
    background: bool
    recovered: list[str]  # what the start found broken or unfinished, and did about it
    own_sessions: OwnSessions  # confined sessions kept for engram's own queries (`query`); the host closes them
    # The projections, while open (`_open_projections`).
    runner: ProjectionRunner
    _ctx: ProjectionContext | None
    _error: BaseException | None  # the fold loop's last failure, until a fold succeeds
    _thread: threading.Thread | None
    # Events per type through `_counted_through` (`ShardQueries.events_by_type`).
    _counts_lock: threading.Lock
    _counts: dict[str, int]
    _counted_through: int

    # ------------------------------------------------------------------ cross-part (implemented in their parts)

    if TYPE_CHECKING:
        def read(self, after: int = 0, **filters: Any) -> list[Recorded]: ...  # host

        def _open_store(self) -> EventStore: ...  # host

        def _open_projections(self) -> None: ...  # host

        def _close_projections(self) -> None: ...  # host

        def _discard_open_projections(self) -> None: ...  # host

        def wait_projections(self, seq: int, timeout: float | None = 30.0) -> bool: ...  # host

        def events_by_type(self) -> dict[str, int]: ...  # queries

        def _recount(self) -> None: ...  # queries

        def rebuild(self, *, retain_cache: bool = False) -> dict[str, Any]: ...  # repair

        @property
        def _rebuild_dir(self) -> Path: ...  # repair

        def _outputs(self, paths: ProjectionPaths) -> list[Path]: ...  # repair

        def unfinished_forgets(self) -> list[dict[str, Any]]: ...  # forget

        def complete_forget(self, marker_seq: int, streams: list[str]) -> tuple[dict[str, Any], list[str]]: ...  # forget

        @property
        def _journal(self) -> Path: ...  # forget

        def _void_generation(self, why: str) -> None: ...  # generation

        def _close_generation(self) -> None: ...  # generation

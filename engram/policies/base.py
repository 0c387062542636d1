"""What a policy is: a consumer that reads events and decides on new ones.

A policy's decisions depend only on the events it has seen (and, for LLM work, on the
memory-task service, whose output it records in the event it appends). It keeps its state
in memory, updating it as soon as it decides (so it never decides the same thing twice
while its own event is on its way), and gives every event it appends a deterministic
`event_id`: when a restart re-reads events it had already handled, the log refuses the
duplicate appends. At-least-once handling plus idempotent appends: exactly-once effect.

Policies hold no Ray and no wall clock: time is the event time of what they read.
"""

from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from engram.events.envelope import Appended, Recorded, Write
from engram.home import Home


@dataclass
class PolicyContext:
    shard: int
    home: Home
    services: dict[str, Any] = field(default_factory=dict)  # e.g. "tasks" (memory tasks), "embedder"
    member: int = 0  # index of this host within its pool
    members: int = 1  # pool size; logical actors are placed by consistent hashing
    # The shard's log, for policies that read history back (e.g. a regeneration re-reads a
    # discussion) or save long work as they go (appends need deterministic event ids).
    read: Callable[..., list[Recorded]] | None = None
    append: Callable[[list[Write]], list[Appended]] | None = None

    @property
    def tasks(self) -> Any:
        """The memory tasks: the service's, else made once from the configured (or default) LLM settings."""
        tasks = self.services.get("tasks")
        if tasks is None:
            from engram.llm.factory import make_tasks

            config = self.services.get("config")
            tasks = self.services["tasks"] = make_tasks(config.llm if config is not None else None)
        return tasks


class Policy(ABC):
    name: ClassVar[str]
    # Event types this policy reads; None means all.
    interests: ClassVar[frozenset[str] | None] = None

    def __init__(self, ctx: PolicyContext):
        self.ctx = ctx
        self.position = 0

    @abstractmethod
    def handle(self, batch: list[Recorded]) -> list[Write]:
        """React to `batch` (events after `position`, of the types of interest, in seq order)."""

    def state(self) -> Any:
        """What must survive a restart besides the position (pickled)."""
        return None

    def restore(self, state: Any) -> None:
        pass

    def snapshot(self) -> bytes:
        return pickle.dumps({"position": self.position, "state": self.state()}, protocol=pickle.HIGHEST_PROTOCOL)

    def load_snapshot(self, data: bytes) -> None:
        snap = pickle.loads(data)
        self.position = snap["position"]
        self.restore(snap["state"])

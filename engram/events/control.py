"""Control events: settings, time, generations, forgetting."""

from __future__ import annotations

from typing import Any

from engram.config.recorded import SCOPE_DISCUSSION, check_recorded_settings
from engram.events.base import Event


class SettingsChanged(Event, tag="SettingsChanged", frozen=True):
    """The settings a policy must use from here on, recorded so replay and regeneration agree.

    `scope` is "discussion" (the WilmerAI settings file) or "agent" (agent.config.json);
    `settings` holds the validated file content with its user-facing keys.
    """

    scope: str
    name: str
    settings: dict[str, Any]
    content_hash: str

    def check(self) -> None:
        # Every fold parses `settings` with the model of its scope: what it cannot parse is refused now.
        check_recorded_settings(self.scope, self.name, self.settings)


class ClockTick(Event, tag="ClockTick", frozen=True):
    """Periodic work is driven by these, so that replay reproduces it (ts = the tick time, an interval boundary).

    One tick stands for every boundary crossed since the previous tick of the agent (`since_us`, 0 for
    ticks recorded before this field): consolidation does what fell due in between, each at its own boundary.
    """

    interval_s: int
    reason: str = "interval"
    since_us: int = 0


class GenerationStarted(Event, tag="GenerationStarted", frozen=True):
    """Regeneration: memories of `generation` supersede older ones; old events stay in the log."""

    generation: int
    reason: str
    settings: dict[str, Any] | None = None
    # Set by a regeneration through the Message Batches API (its job's id): the generation's memory events were
    # computed by the job and follow this event in the same write, so the Summarizer adopts them instead of
    # deciding the generation again (see `engram.memory.discussion.batch_plan`).
    batch: str | None = None

    def check(self) -> None:
        if self.settings is not None:
            check_recorded_settings(SCOPE_DISCUSSION, "GenerationStarted.settings", self.settings)


class DiscussionForgotten(Event, tag="DiscussionForgotten", frozen=True):
    discussion_id: str
    reason: str = ""


class AgentForgotten(Event, tag="AgentForgotten", frozen=True):
    agent_id: str
    reason: str = ""


class Purged(Event, tag="Purged", frozen=True):
    """What an erased event's row holds after a purge: its payload is gone from the log file."""

    original_type: str


class Unreadable(Event, tag="Unreadable", frozen=True):
    """What a read gives in place of a stored event that does not decode (written before events were
    validated, or by a newer engram): folds skip it, and the shard quarantines it (`fold_failed`).
    Never appended."""

    original_type: str
    error: str


# Forgetting keeps its own markers: they hold nothing but the id that was forgotten.
FORGET_MARKERS = ("DiscussionForgotten", "AgentForgotten", "MemoryDeleted")

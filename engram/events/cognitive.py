"""Cognitive-memory events (Wunderland/AgentOS): traces, graph, working memory, mood."""

from __future__ import annotations

from engram.events.base import Event
from engram.events.provenance import LlmCall


class TraceEncoded(Event, tag="TraceEncoded"):
    """A new MemoryTrace with its full initial state (the traces table folds these)."""

    trace_id: str
    content: str
    trace_type: str  # episodic | semantic | procedural | prospective | relational
    scope: str  # "discussion" | "agent"
    scope_id: str
    source_type: str  # user_statement | agent_inference | tool_result | observation | reflection | schema
    source_seqs: tuple[int, ...]
    importance: float
    confidence: float
    strength: float
    stability_s: float
    interval_s: float
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source_message_ids: tuple[str, ...] = ()
    valence: float = 0.0
    arousal: float = 0.0
    dominance: float = 0.0
    intensity: float = 0.0
    flashbulb: bool = False
    llm: LlmCall | None = None


class TraceRetrieved(Event, tag="TraceRetrieved"):
    """Traces returned by a retrieval; the fold reinforces each (stability, strength, interval)."""

    query: str
    trace_ids: tuple[str, ...]
    scores: tuple[float, ...] = ()


class TraceReinforced(Event, tag="TraceReinforced"):
    """A reinforcement outside retrieval, e.g. a spaced-repetition review that was due."""

    trace_id: str
    reason: str


class TracePruned(Event, tag="TracePruned"):
    """Soft deletion of a trace whose strength fell below the prune threshold."""

    trace_id: str
    strength: float
    reason: str = "decay"


class EdgeAdded(Event, tag="EdgeAdded"):
    src: str
    dst: str
    kind: str  # shared_entity | temporal_sequence | same_topic | contradicts | supersedes | caused_by | co_activated | schema_instance
    weight: float


class EdgeStrengthened(Event, tag="EdgeStrengthened"):
    src: str
    dst: str
    kind: str
    delta: float


class SchemaCreated(Event, tag="SchemaCreated"):
    """A semantic trace summarising a cluster of episodic traces."""

    schema_trace_id: str
    member_ids: tuple[str, ...]
    summary: str
    llm: LlmCall | None = None


class ConflictResolved(Event, tag="ConflictResolved"):
    winner: str
    loser: str
    resolution: str  # prefer_newer | keep_both | prefer_confidence
    note: str = ""


class WorkingMemoryFocused(Event, tag="WorkingMemoryFocused"):
    trace_id: str
    activation: float
    content: str = ""


class WorkingMemoryEvicted(Event, tag="WorkingMemoryEvicted"):
    trace_id: str
    reason: str


class WorkingMemoryTicked(Event, tag="WorkingMemoryTicked"):
    turn: int


class FactIngested(Event, tag="FactIngested"):
    category: str  # user_preference | episodic | goal | knowledge | correction | action_item | emotional_context
    content: str
    importance: float
    trace_id: str
    source_seq: int
    entities: tuple[str, ...] = ()
    llm: LlmCall | None = None


class LessonLearned(Event, tag="LessonLearned"):
    pattern: str
    lesson: str
    tool: str
    trace_id: str
    source_seq: int


class MoodChanged(Event, tag="MoodChanged"):
    valence: float
    arousal: float
    dominance: float
    reason: str = ""

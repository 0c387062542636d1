"""Cognitive-memory events (Wunderland/AgentOS): traces, their graph, working memory, mood.

Every change to a MemoryTrace is one of these events; the `memory_traces` table is their fold
(`engram.memory.cognitive.book.TraceBook`). Streams: a trace derived from a discussion lives in that
discussion's stream (so forgetting the discussion forgets it); agent-wide events (mood, working
memory, retrievals without a discussion) go to `agent:<agent>`.
"""

from __future__ import annotations

import msgspec

from engram.events.base import Event
from engram.events.provenance import LlmCall


class Link(msgspec.Struct, frozen=True, array_like=True):
    """An edge into a trace, recorded with the trace (`TraceEncoded.links`): `src` -> the new trace.
    Stored as a JSON array, `[src, kind, weight]`."""

    src: str
    kind: str
    weight: float


class TraceEncoded(Event, tag="TraceEncoded", frozen=True):
    """A new MemoryTrace with its full initial state; its event time is its encoding time.

    `links`: the edges it gets as it is encoded (`engram.memory.cognitive.linking`: temporal_sequence,
    same_topic, shared_entity; a schema's schema_instance edges from its members), each from another
    trace to this one. They fold exactly as `EdgeAdded` events right after this one would (logs written
    before this field hold them as such), but cost no event each.
    """

    trace_id: str
    content: str
    trace_type: str  # episodic | semantic | procedural | prospective | relational
    scope: str  # "discussion" | "agent"
    scope_id: str  # the discussion id, or the agent id
    source_type: str  # user_statement | agent_inference | tool_result | observation | reflection | schema
    source_seqs: tuple[int, ...]
    importance: float
    confidence: float
    strength: float  # encoding strength S0
    stability_s: float
    interval_s: float  # spaced-repetition interval; the first review is due at encoding + interval
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    category: str = ""  # auto-ingest fact category, "lesson", "observation", …
    source_message_ids: tuple[str, ...] = ()  # LoCoMo dialog ids such as "D1:3" map back through these
    valence: float = 0.0  # PAD snapshot at encoding
    arousal: float = 0.0
    dominance: float = 0.0
    intensity: float = 0.0  # emotional intensity of the content; > 0.8 makes a flashbulb memory
    flashbulb: bool = False
    llm: LlmCall | None = None
    # What the trace is understood in, indexed with it but not part of it: for a reply, the question it
    # answers (engram.memory.cognitive.indexing).
    context: str = ""
    # The message(s) `context` was taken from (its provenance: recall shows the context with the memory).
    context_message_ids: tuple[str, ...] = ()
    links: tuple[Link, ...] = ()


class TraceRetrieved(Event, tag="TraceRetrieved", frozen=True):
    """Traces returned by a retrieval, best first; the fold reinforces each and links the top ones (Hebbian)."""

    query: str
    trace_ids: tuple[str, ...]
    scores: tuple[float, ...] = ()
    discussion: str | None = None
    hyde: str = ""  # the hypothetical memory HyDE searched with, when it was used
    # How each trace became a candidate ("similarity", "keywords", "hyde", "activation"); only traces the
    # query itself found take part in Hebbian co-activation (empty in events recorded before this field).
    via: tuple[str, ...] = ()


class TraceReinforced(Event, tag="TraceReinforced", frozen=True):
    """A reinforcement outside retrieval, e.g. a spaced-repetition review that was due (Consolidator)."""

    trace_id: str
    reason: str


class Reinforcement(msgspec.Struct, frozen=True, array_like=True):
    """One trace of a `TracesReinforced`, stored as `[trace_id, reason]`."""

    trace_id: str
    reason: str


class TracesReinforced(Event, tag="TracesReinforced", frozen=True):
    """Several reinforcements at one time, in order (e.g. the reviews due at one consolidation boundary):
    folds exactly as one `TraceReinforced` per item would."""

    items: tuple[Reinforcement, ...]


class TracePruned(Event, tag="TracePruned", frozen=True):
    """Soft deletion of a trace whose Ebbinghaus strength fell below the prune threshold (0.05)."""

    trace_id: str
    strength: float
    reason: str = "decay"


class EdgeAdded(Event, tag="EdgeAdded", frozen=True):
    src: str
    dst: str
    kind: str  # shared_entity | temporal_sequence | same_topic | contradicts | supersedes | caused_by | co_activated | schema_instance
    weight: float


class NewEdge(msgspec.Struct, frozen=True, array_like=True):
    """One edge of an `EdgesAdded`, stored as `[src, dst, kind, weight]`."""

    src: str
    dst: str
    kind: str
    weight: float


class EdgesAdded(Event, tag="EdgesAdded", frozen=True):
    """Several edges at one time, in order (e.g. a consolidation boundary's co-activation replay): folds
    exactly as one `EdgeAdded` per edge would."""

    edges: tuple[NewEdge, ...]


class EdgeStrengthened(Event, tag="EdgeStrengthened", frozen=True):
    src: str
    dst: str
    kind: str
    delta: float


class SchemaCreated(Event, tag="SchemaCreated", frozen=True):
    """A semantic trace summarising a cluster of episodic traces."""

    schema_trace_id: str
    member_ids: tuple[str, ...]
    summary: str
    llm: LlmCall | None = None


class ConflictResolved(Event, tag="ConflictResolved", frozen=True):
    winner: str
    loser: str
    resolution: str  # prefer_newer | keep_both | prefer_confidence
    note: str = ""


class Slot(msgspec.Struct, frozen=True, kw_only=True):
    """One working-memory slot."""

    trace_id: str
    activation: float
    content: str
    entered_turn: int
    rehearsals: int = 0


class Eviction(msgspec.Struct, frozen=True, kw_only=True):
    trace_id: str
    reason: str  # "capacity" | "decayed" | "pruned"


class WorkingMemoryUpdated(Event, tag="WorkingMemoryUpdated", frozen=True):
    """One change of an agent's working memory: a turn's decay and/or traces taking focus.

    `slots` is the whole state after the change, strongest first, so the fold is a replacement.
    """

    turn: int
    capacity: int
    reason: str  # "turn" | "encoded" | "retrieved" | "pruned"
    slots: tuple[Slot, ...]
    focused: tuple[str, ...] = ()
    evicted: tuple[Eviction, ...] = ()


class WorkingMemoryWritten(Event, tag="WorkingMemoryWritten", frozen=True):
    """The persistent markdown memory of `working-memory.md`, replaced (kept within its token budget)."""

    markdown: str
    truncated: bool = False
    budget_tokens: int = 0


class SkippedFact(msgspec.Struct, frozen=True, kw_only=True):
    content: str
    category: str
    importance: float
    reason: str  # "duplicate" | "quoted" | "below_threshold" | "over_limit" | "category"
    # The trace it duplicates (that trace gains a verification). A "quoted" fact — the assistant restating a
    # memory — names none: repeating a memory is no evidence for it.
    duplicate_of: str | None = None
    similarity: float | None = None


class FactsIngested(Event, tag="FactsIngested", frozen=True):
    """Auto-ingest of one turn: the facts kept (as traces) and those skipped, and why."""

    source_seq: int
    message_id: str
    trace_ids: tuple[str, ...]
    skipped: tuple[SkippedFact, ...] = ()
    importance_threshold: float = 0.0
    max_per_turn: int = 0
    dedup_threshold: float = 0.0
    llm: LlmCall | None = None


class LessonLearned(Event, tag="LessonLearned", frozen=True):
    """A tool failure matched one of the six patterns and became a lesson trace."""

    pattern: str
    lesson: str
    tool: str
    trace_id: str
    source_seq: int


class MoodChanged(Event, tag="MoodChanged", frozen=True):
    """The agent's PAD mood from here on (`engram mood set`, or sentiment tracking)."""

    valence: float
    arousal: float
    dominance: float
    reason: str = ""

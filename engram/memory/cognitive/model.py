"""The MemoryTrace: Wunderland's universal envelope of a memory, and the words around it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from engram.kernel.records import Column

TRACE_TYPES = ("episodic", "semantic", "procedural", "prospective", "relational")
SCOPES = ("discussion", "agent")
SOURCE_TYPES = ("user_statement", "agent_inference", "tool_result", "observation", "reflection", "schema")
EDGE_KINDS = (
    "shared_entity",
    "temporal_sequence",
    "same_topic",
    "contradicts",
    "supersedes",
    "caused_by",
    "co_activated",
    "schema_instance",
)
# Kinds without a direction: stored once with src < dst.
SYMMETRIC_EDGE_KINDS = frozenset({"shared_entity", "same_topic", "co_activated"})

US_PER_S = 1_000_000


@dataclass(kw_only=True)
class MemoryTrace:
    """One memory with its provenance, emotional context, decay state and spaced-repetition state.

    Mutable: it is the state of a fold (and a dataclass, as the policies' snapshots pickled it). Times are event
    times in microseconds. The one declaration of a trace's read model: the `memory_traces` table is these
    fields in this order (`engram.kernel.records`; `Column` names the columns that differ from the field).
    """

    trace_id: str
    agent: str
    stream: str  # the stream its events live in (a discussion id, or agent:<agent>)
    scope: str
    scope_id: str
    trace_type: str
    category: str = ""
    content: str
    entities: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    # Provenance.
    source_type: str
    source_seqs: tuple[int, ...]
    source_message_ids: tuple[str, ...]
    confidence: float
    verification_count: int = 0
    contradicted_by: tuple[str, ...] = ()
    # Emotional context at encoding.
    valence: float
    arousal: float
    dominance: float
    intensity: float
    flashbulb: bool
    # Decay state.
    importance: float
    encoding_strength: float  # S0 since the last access
    stability_s: float
    retrieval_count: int = 0
    encoded_us: Annotated[int, Column("encoded_at", timestamp=True)]
    last_access_us: Annotated[int, Column("last_access", timestamp=True)]
    # Spaced repetition.
    interval_s: Annotated[float, Column("reinforcement_interval_s")]
    next_due_us: Annotated[int, Column("next_due", timestamp=True)]
    links: set[str] = field(default_factory=set)
    active: bool = True
    deleted_us: Annotated[int | None, Column("deleted_at", timestamp=True)] = None
    deleted_reason: str | None = None
    last_seq: int = 0
    context: str = ""  # indexed with the content, not part of it: for a reply, the question it answers
    # Not stored: every sentence of the content is a question (indexing.asks): it states nothing.
    asks: Annotated[bool, Column(stored=False)] = False
    # Validity in time (issue 24), beside when it was learned: true from the event time of what it was made from, until
    # a newer trace contradicted it (a correction or a later contradicting fact; `contradicted_by`) — then it is
    # closed at the newer one's valid_from, and superseded_by names it. Derived from the trace's own events (`valid`).
    valid_from_us: Annotated[int, Column("valid_from", timestamp=True)] = 0
    valid_to_us: Annotated[int | None, Column("valid_to", timestamp=True)] = None
    superseded_by: str = ""
    # The user's labels (`MemoryEdited`), as sorted (key, value) pairs, stored as a JSON object (NULL: none): a
    # class-level default, so traces pickled before it have it too.
    metadata: Annotated[tuple[tuple[str, str], ...], Column(json=True)] = ()
    context_message_ids: tuple[str, ...] = ()  # where `context` comes from

    def valid_at(self, at_us: int) -> bool:
        """True at event time `at_us`: learned by then, not yet closed by a newer contradicting trace."""
        return self.valid_from_us <= at_us and (self.valid_to_us is None or at_us < self.valid_to_us)

    def in_scope(self, discussion: str | None) -> bool:
        """Visible from `discussion` (None: the whole agent): agent-scoped traces are visible everywhere."""
        return discussion is None or self.scope == "agent" or self.scope_id == discussion


def canonical_edge(src: str, dst: str, kind: str) -> tuple[str, str, str]:
    """The stored key of an edge: symmetric kinds are kept once, with the smaller id first."""
    if kind in SYMMETRIC_EDGE_KINDS and dst < src:
        src, dst = dst, src
    return src, dst, kind

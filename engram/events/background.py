"""Events of the background processes: observations, reflections, context compaction."""

from __future__ import annotations

import msgspec

from engram.events.base import Event
from engram.events.provenance import LlmCall


class ObservationNote(msgspec.Struct, frozen=True, kw_only=True):
    note_id: str
    type: str  # factual | emotional | commitment | preference | creative | correction
    text: str
    importance: float
    observed_us: int
    entities: tuple[str, ...] = ()
    refers_to: str | None = None  # ISO date the note refers to ("next Friday" resolved)
    details: tuple[str, ...] = ()
    source_seqs: tuple[int, ...] = ()
    confidence: float = 0.7


class ObservationsRecorded(Event, tag="ObservationsRecorded"):
    """Observer output for messages `first_seq..last_seq`; buffered notes wait for activation."""

    notes: tuple[ObservationNote, ...]
    first_seq: int
    last_seq: int
    input_tokens: int
    output_tokens: int
    buffered: bool
    llm: LlmCall


class ObservationsActivated(Event, tag="ObservationsActivated"):
    """Buffered notes up to `through_seq` join the observation log (the 30K threshold was crossed)."""

    through_seq: int


class Reflected(Event, tag="Reflected"):
    """Reflector output: notes consumed, traces created, what was superseded."""

    consumed_note_ids: tuple[str, ...]
    trace_ids: tuple[str, ...]
    superseded: tuple[str, ...]
    input_tokens: int
    output_tokens: int
    llm: LlmCall


class ContextCompacted(Event, tag="ContextCompacted"):
    """One node of a discussion's compaction chain (infinite context): a summary that replaces raw
    turns (`messages` > 0) and/or earlier nodes (`children`) in the context sent to the model.

    The chain (the projection `context_compactions`, `engram compactions`) is the fold of these events
    alone: replay rebuilds it without an LLM call. `first_seq..last_seq` and `first_turn..last_turn`
    are the messages the node stands for (its whole subtree); `covered_tokens` their raw tokens.

    Transparency (`memory.infiniteContext.transparencyLevel`, engram.context.transparency): the chain
    fields are always recorded; `full` also keeps `dropped` (ids of the messages or nodes whose content
    the summary does not carry), `preserved_entities`, `traces_created`, `duration_ms` and the LLM calls;
    `summary` keeps the counts, figures, entities and traces but not the dropped ids; `none` keeps the
    chain fields only.
    """

    node_id: str
    strategy: str  # sliding | hierarchical | hybrid
    level: int  # 0: summarises raw turns; L1, L2: merged from lower nodes (hierarchical, hybrid)
    first_seq: int
    last_seq: int
    first_turn: int
    last_turn: int
    summary: str
    input_tokens: int  # tokens this node replaces in the context (raw turns + child nodes)
    output_tokens: int  # tokens of `summary`
    covered_tokens: int = 0  # raw message tokens the node stands for
    target_tokens: int = 0  # the summary length asked for (targetCompressionRatio, chain budget)
    children: tuple[str, ...] = ()  # nodes it replaces in the chain
    messages: int = 0  # raw turns it replaces
    trigger: str = "threshold"  # threshold (context over compactionThreshold) | chain (over maxSummaryChainTokens)
    context_tokens_before: int = 0
    context_tokens_after: int = 0
    window_tokens: int = 0  # contextWindowTokens in force
    transparency: str = "full"  # full | summary | none
    dropped_count: int = 0
    dropped: tuple[str, ...] = ()
    preserved_entities: tuple[str, ...] = ()
    traces_created: tuple[str, ...] = ()
    notes_reused: int = 0  # hybrid: Observer notes of the span taken from the log
    notes_observed: int = 0  # hybrid: notes the compaction observed itself
    duration_ms: float = 0.0
    llm: tuple[LlmCall, ...] = ()

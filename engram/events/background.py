"""Events of the background processes: observations, reflections, consolidation runs, context compaction.

Observation notes are recorded in the stream of the discussion they observe (forgetting the
discussion forgets them). An observation log has a scope: "discussion" (one log per discussion,
the default) or "agent" (one log across the agent's discussions); `scope`/`scope_id` name it.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from engram.events.base import Event
from engram.events.provenance import LlmCall
from engram.kernel.records import Column


class ObservationNote(msgspec.Struct, frozen=True, kw_only=True):
    note_id: str
    type: str  # factual | emotional | commitment | preference | creative | correction
    text: str
    importance: float
    observed_us: Annotated[int, Column("observed_at", timestamp=True)]
    entities: tuple[str, ...] = ()
    refers_to: str | None = None  # ISO date the note refers to ("next Friday" resolved)
    details: tuple[str, ...] = ()
    source_seqs: tuple[int, ...] = ()
    confidence: float = 0.7
    # Message ids of `source_seqs` (e.g. LoCoMo dialog ids), filled in by the Observer.
    source_message_ids: tuple[str, ...] = ()


class ObservationsRecorded(Event, tag="ObservationsRecorded", frozen=True):
    """Observer output for the messages `first_seq..last_seq` of this stream (each message is observed once).

    `buffered`: an increment observed in the background, waiting for `ObservationsActivated`; otherwise
    the notes joined the observation log at once (no buffering, the threshold was crossed).
    `input_tokens`: the messages' tokens; `output_tokens`: the notes' (their ratio is the compression).
    """

    notes: tuple[ObservationNote, ...]
    first_seq: int
    last_seq: int
    input_tokens: int
    output_tokens: int
    buffered: bool
    llm: LlmCall
    scope: str = "discussion"  # "discussion" | "agent": which observation log the notes belong to
    scope_id: str = ""  # the discussion id, or the agent id
    messages: int = 0  # messages observed


class ObservationsActivated(Event, tag="ObservationsActivated", frozen=True):
    """The unobserved tokens crossed the Observer's threshold (30K): the buffered notes of this
    observation log recorded up to `through_seq` join it, without observing anything again.

    `unobserved_tokens` were the tokens not yet in the log at the crossing (buffered + not yet
    observed); the messages after the last increment stay unobserved until the next one.
    """

    through_seq: int
    scope: str = "discussion"
    scope_id: str = ""
    threshold: int = 0
    unobserved_tokens: int = 0
    increments: int = 0  # buffered ObservationsRecorded activated
    note_count: int = 0
    message_tokens: int = 0  # tokens of the messages whose notes joined the log
    note_tokens: int = 0


class Reflected(Event, tag="Reflected", frozen=True):
    """Reflector output: the notes it consumed (they stay in the log, marked), the traces it created,
    what lost a contradiction (note or trace ids). `input_tokens`: the notes' tokens, the 40K threshold's
    measure; `output_tokens`: the traces' (their ratio is the reflection compression)."""

    consumed_note_ids: tuple[str, ...]
    trace_ids: tuple[str, ...]
    superseded: tuple[str, ...]
    input_tokens: int
    output_tokens: int
    llm: LlmCall
    scope: str = "discussion"
    scope_id: str = ""
    threshold: int = 0
    conflicts: int = 0  # contradictions resolved (ConflictResolved events that follow)
    trace_note_ids: tuple[tuple[str, ...], ...] = ()  # per trace of `trace_ids`: the notes it condenses
    # Candidates that restate an active trace (e.g. auto-ingest's fact of the same message): no new trace;
    # the trace in `duplicates` gains a verification, and `duplicate_note_ids` are the notes it stands for.
    duplicates: tuple[str, ...] = ()
    duplicate_note_ids: tuple[tuple[str, ...], ...] = ()


class ConsolidationRan(Event, tag="ConsolidationRan", frozen=True):
    """What consolidation did at a clock tick (its event time), step by step, through everything due since the last.

    `traces`: active traces the run looked at; `bounded`: the steps that stopped at `max_traces`
    (the rest waits for the next run); `duration_ms` is the run's wall time (informational).
    """

    interval_s: int
    traces: int
    pruned: int
    edges: int
    schemas: int
    conflicts: int
    reinforced: int
    max_traces: int
    bounded: tuple[str, ...] = ()
    duration_ms: float = 0.0
    llm_calls: int = 0
    # What the tick covered: the previous tick (`since_us`), the boundaries in between at which something was
    # due and done (`runs`; every other boundary was idle and cost nothing), how many of those were a late
    # trace's own past timeline (`late`), and the first of them (`first_us`). 0 in events from before.
    since_us: int = 0
    runs: int = 0
    late: int = 0
    first_us: int = 0


class ContextCompacted(Event, tag="ContextCompacted", frozen=True):
    """One node of a discussion's compaction chain (infinite context): a summary that replaces raw
    turns (`messages` > 0) and/or earlier nodes (`children`) in the context sent to the model.

    The chain (the projection `context_compactions`, `engram compactions`) is the fold of these events
    alone: replay rebuilds it without an LLM call. `first_seq..last_seq` and `first_turn..last_turn`
    are the messages the node stands for (its whole subtree); `covered_tokens` their raw tokens.

    Transparency (`memory.infiniteContext.transparencyLevel`, engram.memory.context.transparency): the chain
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

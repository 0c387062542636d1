"""Infinite context (Wunderland's "forever conversations") as pure logic: no Ray, no I/O, no clock.

A discussion's context, as the model would receive it, is its compaction chain (summary nodes,
oldest first) followed by the raw turns not compacted yet. When it passes `compactionThreshold`
(0.75) of `contextWindowTokens`, the oldest raw turns — never the last `preserveRecentTurns` (20) —
are compacted:

- `sliding`: one rolling summary absorbs them (and the previous summary);
- `hierarchical`: they become an L0 node; while the chain passes `maxSummaryChainTokens`, its oldest
  nodes merge upward (L0 -> L1 -> L2), so that compression reaches up to 1000x;
- `hybrid`: Observer notes of the span (those the log holds, the rest observed now), condensed by the
  Reflector (merged, contradictions resolved, important facts elevated to traces), plus a narrative
  summary; the chain then merges upward as in `hierarchical`.

A turn is one message (LoCoMo's and AgentOS's sense). Modules:

- `chain`: the chain and raw turns of one discussion, the fold of `ContextCompacted` events;
- `rules`: the threshold, which turns may be compacted, summary lengths, which nodes merge;
- `hybrid`: observation notes of a span, their rendering, the traces the reflection elevates;
- `transparency`: what each `transparencyLevel` keeps;
- `compactor`: one compaction (its memory-task calls) -> `ContextCompacted` (+ `TraceEncoded`) events;
- `assemble`: the context that would be sent to the model now, block by block within its budget;
- `simulate`: a conversation through the rules without a log (benchmark, demo, tests).

The `ContextCompactor` policy (engram.policies.context_compactor) runs this on the log; the projection
`context_compactions` (engram.projections.compactions) folds the chain for SQL; `history` reads the chain
and assembles the context through SQL; `engram.api` serves them; `engram compactions`, `engram context` and `engram chat` the commands.
"""

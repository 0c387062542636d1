"""Discussion memory: the WilmerAI memory system on engram's event log.

The pure logic lives here (no Ray, no I/O, no clock):

- `chunking`: which messages become a chunk memory, and when (the two thresholds, lookback,
  standard vs. consolidation mode).
- `rolling`: the `chatSummarySummarizer` merge loop (`minMemoriesPerSummary`, `loopIfMemoriesExceed`).
- `summarizer`: the per-discussion logical actor that turns message events into memory events
  (its state, and resuming it from the log, in `state`).
- `vectors`: the searchable store `<id>_vector_memory.db` (its schema, writing it, reading it).
- `search`: `VectorMemorySearch` (keywords, modes keyword/semantic/hybrid).
- `files`: reading `<id>_memories.jsonl` and `<id>_summary.jsonl`.
- `workflow`: the workflow engine and its nodes.

The shells are `engram.policies.summarizer` (hosted by the foundation's PolicyActor pool),
`engram.projections.discussion_files`, `engram.projections.vector_memory` and the CLI commands.
"""

"""Cognitive memory (Wunderland/AgentOS) as pure logic: no Ray, no I/O, no clock.

- `model`: the MemoryTrace and the vocabularies (trace types, scopes, sources, edge kinds).
- `personality`: HEXACO traits and PAD mood, and what they modulate.
- `encoding`: a new trace's strength, stability and emotional context (flashbulb memories).
- `decay`: the Ebbinghaus curve, reinforcement on retrieval, spaced repetition, the decay sweep.
- `graph`: typed weighted edges, spreading activation, Hebbian co-activation.
- `linking`: the edges a new trace gets (temporal sequence, same topic, shared entity).
- `scoring`: the six-factor composite with its weights.
- `book`: the fold of cognitive events into traces and graph (projection, reader and policies share it);
  `memory`: a book plus its HNSW and keyword indexes, entity and discussion bookkeeping (what readers of the log keep).
- `indexing`: what finds a trace (its content, the question a reply answers, its day);
  `lexical`: the BM25 keyword match in [0, 1], the lexical half of hybrid similarity.
- `hit`: a recall hit as it is shown (the core's and the API's, declared once);
  `retrieval`: recall over a book and its indexes (similarity "hybrid" by default, or "embedding");
  `hyde`: the adaptive-threshold HyDE loop.
- `working_memory`: Baddeley's capacity-limited slots and `working-memory.md`.
- `ingest`: auto-ingest rules (threshold, per-turn limit, deduplication); `tool_failures`: the six patterns.
- `llm_bridge`: the one place that touches `engram.providers.llm` (fact policy, emotional reading, chat lines).

Time is always event time in microseconds (`*_us`), passed in by the caller.
"""

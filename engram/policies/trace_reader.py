"""The trace Indexer/reader: each agent's traces, graph and HNSW index in memory, serving recall.

A logical actor per agent on a pool of Ray actors (`engram.actors.policy.PolicyActor` hosts it and
keeps it caught up with the log). `recall` runs on the read path, several at once (it only reads the
memories; the host folds new events between them): it embeds the query (and, with
HyDE, a hypothetical memory), scores candidates with the six-factor composite and returns at once;
the `TraceRetrieved` event it implies is queued and appended right after the answer has left
(`take_writes`), and reinforces the traces when the log folds it back in.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace

from engram.events.cognitive import TraceRetrieved
from engram.events.envelope import NewEvent, Recorded, Write
from engram.kernel.ids import agent_stream, validate_agent, validate_discussion
from engram.memory.cognitive.book import INTERESTS as TRACE_EVENTS
from engram.memory.cognitive.filters import TraceFilter
from engram.memory.cognitive.ingest import ingest_rules
from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.retrieval import RecallQuery, RecallResult, RecallSettings, limit_for, override_weights, recall
from engram.policies.cognitive_base import CognitivePolicy


class TraceReader(CognitivePolicy):
    name = "trace-reader"
    interests = frozenset({"SettingsChanged"}) | TRACE_EVENTS
    # Its own recalls' TraceRetrieved are folded as they are appended (HostedCalls), and a fresh recall folds the log up
    # to where it must: appending them need not wake the actor's loop as well.
    unhurried = frozenset({"TraceRetrieved"})
    # Read-only questions: the host runs them alongside each other (never alongside the fold of new events).
    concurrent_reads = frozenset({"recall", "agents"})
    dormant = True  # recall's dormant stage searches the decay-pruned traces (engram.memory.cognitive.retrieval, step 8)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._outbox: list[Write] = []
        self._outbox_lock = threading.Lock()
        self._retrievals = 0

    def handle(self, batch: list[Recorded]) -> list[Write]:
        pending = []
        for rec in batch:
            if rec.type == "SettingsChanged":
                self.settings.apply(rec)
            elif self.owns(rec.agent):
                pending.append(rec)
        if pending:
            self.fold(pending)
        return self.take_writes()

    def take_writes(self) -> list[Write]:
        with self._outbox_lock:
            out, self._outbox = self._outbox, []
        return out

    def recall(
        self,
        agent: str,
        query: str,
        *,
        now_us: int,
        limit: int | None = None,
        discussion: str | None = None,
        weights: dict[str, float] | None = None,
        hyde: bool | None = None,
        mood: tuple[float, float, float] | None = None,
        record: bool = True,
        similarity: str | None = None,
        only: TraceFilter | None = None,
        as_of_us: int | None = None,
    ) -> RecallResult:
        """The best traces of `agent` for `query` at event time `now_us`, with their factor breakdown.

        `weights` overrides any factor weight for this call; `hyde` overrides `rag.hyde.enabled`;
        `mood` overrides the agent's current mood (valence, arousal, dominance); `similarity`
        overrides `memory.retrieval.similarity` ("hybrid" or "embedding"); `as_of_us` answers what was true at that
        event time (superseded facts included, later ones left out; default: what is true now); `only`
        filters the candidates (kind, time range, metadata).
        """
        validate_agent(agent)
        if discussion is not None:
            validate_discussion(discussion)
        if not self.owns(agent):
            raise ValueError(f"agent {agent!r} is not placed on this reader (member {self.ctx.member})")
        cfg = self.config_of(agent)
        settings = RecallSettings.of(cfg)
        k = limit_for(limit, settings.default_limit, ingest_rules(cfg).extra_results)
        mem = self.memory(agent)
        use_hyde = settings.hyde_enabled if hyde is None else hyde
        if mem.lexical is None:  # only memories of content vectors have none; the reader's hold trace embeddings
            raise RuntimeError(f"{type(self).__name__} keeps no keyword index (content_vectors)")
        focus = mem.lexical.focus(query, settings.focus_common_share)
        hyde_text, texts = "", [focus]
        tasks = self.ctx.services.get("tasks")
        if use_hyde and tasks is not None:
            hyde_text = tasks.hyde(query).value or ""
            if hyde_text.strip():
                texts.append(hyde_text)
        vectors = self.embed_query(texts)
        asked = RecallQuery(
            text=query, vector=vectors[0], now_us=now_us, mood=Pad(*mood) if mood is not None else self.mood_of(agent),
            limit=k, discussion=discussion, focus=focus, hyde_text=hyde_text,
            hyde_vector=vectors[1] if len(texts) > 1 else None, as_of_us=as_of_us, only=only,
        )
        result = recall(mem, asked, replace(settings, weights=override_weights(settings.weights, weights),
                                            similarity=similarity or settings.similarity))
        if record and result.hits:
            self._queue(agent, discussion, query, result, now_us)
        return result

    def _queue(self, agent: str, discussion: str | None, query: str, result: RecallResult, now_us: int) -> None:
        self._retrievals += 1
        event = TraceRetrieved(
            query=query,
            trace_ids=tuple(h.trace_id for h in result.hits),
            scores=tuple(round(h.score, 6) for h in result.hits),
            discussion=discussion,
            hyde=result.hyde.text if result.hyde is not None else "",
            via=tuple(h.via for h in result.hits),
        )
        # Each retrieval is its own event, even when the same question is asked twice in one instant.
        event_id = f"recall:{uuid.uuid4().hex}"
        write = Write(
            stream=discussion or agent_stream(agent),
            agent=agent,
            events=(NewEvent(event=event, ts_us=now_us, event_id=event_id),),
        )
        with self._outbox_lock:
            self._outbox.append(write)

    def agents(self) -> dict[str, int]:
        """Owned agents held now and their active trace counts (evicted agents are not listed)."""
        return {a: len(m.book.active()) for a, m in sorted(self.memories.items())}

    def snapshot(self) -> bytes | None:
        """Nothing to keep (no snapshot is written): after a restart the reader folds the log again (embeddings
        come from the cache). Pickling every agent's index after each pump would put that cost on the read path."""
        return None

"""Auto-ingest: after each turn, the facts worth keeping become traces.

A turn is one message (user, assistant or tool). The memory tasks extract its facts under the
agent's personality; `engram.cognitive.ingest.select` applies the guide's rules (importance >= 0.4,
at most 3 per turn, near-duplicates at cosine >= 0.85 skipped, HEXACO adjustments); each kept fact
is encoded (`engram.cognitive.encoding.encode`) with provenance to its message (seq and message id,
e.g. LoCoMo's "D1:3") and linked to what it follows, resembles, or names.

Appended to the message's discussion stream, with the message's event time:
    FactsIngested (what was kept and skipped, with the LLM provenance), TraceEncoded per kept fact,
    EdgeAdded per link.
"""

from __future__ import annotations

from engram.cognitive import ingest, linking, llm_bridge
from engram.cognitive.encoding import encode, trace_id
from engram.cognitive.personality import ingest_rules
from engram.cognitive.book import INTERESTS as TRACE_EVENTS
from engram.config import defaults as d
from engram.events.cognitive import FactsIngested
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import MessageAppended
from engram.policies.cognitive_base import CognitivePolicy

INGESTED_ROLES = frozenset({"user", "assistant", "tool"})


class AutoIngest(CognitivePolicy):
    name = "auto-ingest"
    interests = frozenset({"MessageAppended", "SettingsChanged"}) | TRACE_EVENTS

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes: list[Write] = []
        pending: list[Recorded] = []  # trace events to fold before the next decision
        turns = self._extract([r for r in batch if self._is_turn(r)])
        for rec in batch:
            if rec.type == "SettingsChanged":
                self.settings.apply(rec)
            elif not self.owns(rec.agent):
                continue
            elif rec.type == "MessageAppended":
                if pending:
                    self.fold(pending)
                    pending = []
                if rec.seq in turns:
                    write = self._turn(rec, *turns[rec.seq])
                    if write is not None:
                        writes.append(write)
            else:
                pending.append(rec)
        if pending:
            self.fold(pending)
        return writes

    def _is_turn(self, rec: Recorded) -> bool:
        return (
            rec.type == "MessageAppended"
            and rec.event.role in INGESTED_ROLES
            and self.owns(rec.agent)
            and self.config_of(rec.agent).storage.auto_ingest.enabled
        )

    def _extract(self, messages: list[Recorded]) -> dict[int, tuple]:
        """Facts of each turn (one memory-task call per turn) and their embeddings (one call for all)."""
        tasks = self.ctx.services.get("tasks")
        if tasks is None or not messages:
            return {}
        extracted = []
        for rec in messages:
            cfg = self.config_of(rec.agent)
            auto = cfg.storage.auto_ingest
            result = tasks.extract_facts(
                [llm_bridge.chat_line(rec)],
                personality=cfg.personality,
                importance_threshold=auto.importance_threshold,
                max_per_turn=auto.max_per_turn,
            )
            facts = [
                ingest.Candidate(category=f.category, content=f.content, importance=f.importance, entities=tuple(f.entities))
                for f in result.value
                if f.content.strip()
            ]
            extracted.append((rec, facts, result.llm))
        vectors = self.embed([f.content for _, facts, _ in extracted for f in facts])
        out, k = {}, 0
        for rec, facts, llm in extracted:
            out[rec.seq] = (facts, vectors[k : k + len(facts)], llm)
            k += len(facts)
        return out

    def _turn(self, rec: Recorded, facts, vectors, llm) -> Write | None:
        msg: MessageAppended = rec.event
        agent = rec.agent
        cfg = self.config_of(agent)
        rules = ingest_rules(cfg)
        mem = self.memory(agent)
        pool = max(8, 2 * d.SAME_TOPIC_MAX_EDGES)
        selection = ingest.select(facts, vectors, rules, lambda v: mem.nearest(v, pool))
        source_type, confidence = ingest.SOURCE_OF_ROLE[msg.role]
        mood = self.mood_of(agent)
        events: list[NewEvent] = []
        kept_ids = []
        own: list[Recorded] = []
        for i, kept in enumerate(selection.kept):
            f = kept.fact
            tid = trace_id(agent, rec.stream, rec.seq, i, f.content)
            agent_scoped = f.category in ingest.AGENT_SCOPED
            trace = encode(
                trace_id=tid,
                content=f.content,
                config=cfg,
                mood=mood,
                scope="agent" if agent_scoped else "discussion",
                scope_id=agent if agent_scoped else rec.stream,
                source_type=source_type,
                source_seqs=(rec.seq,),
                source_message_ids=(msg.message_id,),
                trace_type=ingest.TRACE_TYPE_OF.get(f.category, "episodic"),
                category=f.category,
                importance=f.importance,
                confidence=confidence,
                entities=f.entities,
                tags=("auto-ingest", f.category),
                emotion=llm_bridge.emotion(f.content),
                novelty=kept.novelty,
            )
            edges = linking.edges_for(
                tid,
                encoded_us=rec.ts_us,
                previous=mem.last_in_stream.get(rec.stream),
                similar=list(kept.similar),
                sharing_entities=mem.recent_with_entities(f.entities, exclude=tid),
            )
            new = [NewEvent(event=trace, ts_us=rec.ts_us, event_id=f"trace:{tid}", causation=rec.seq)]
            new += [
                NewEvent(event=e, ts_us=rec.ts_us, event_id=f"edge:{e.src}:{e.dst}:{e.kind}", causation=rec.seq)
                for e in edges
            ]
            events += new
            kept_ids.append(tid)
            # Decide on the next fact knowing this one (its own events come back later as no-ops).
            own = [_local(rec, n) for n in new]
            mem.apply_batch(own, lambda texts, v=kept.vector: v.reshape(1, -1))
        summary = FactsIngested(
            source_seq=rec.seq,
            message_id=msg.message_id,
            trace_ids=tuple(kept_ids),
            skipped=selection.skipped,
            importance_threshold=rules.importance_threshold,
            max_per_turn=rules.max_per_turn,
            dedup_threshold=rules.dedup_threshold,
            llm=llm,
        )
        if not kept_ids and not selection.skipped:
            return None
        events.insert(0, NewEvent(event=summary, ts_us=rec.ts_us, event_id=f"ingest:{rec.seq}", causation=rec.seq))
        return Write(stream=rec.stream, agent=agent, events=tuple(events))


def _local(cause: Recorded, new: NewEvent) -> Recorded:
    """A decided event as this policy folds it before the log returns it (same stream, agent and time)."""
    return Recorded(seq=cause.seq, stream=cause.stream, stream_version=0, agent=cause.agent, ts_us=new.ts_us, event=new.event)

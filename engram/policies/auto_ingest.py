"""After each turn: the facts worth keeping, and the user's message itself, become traces.

A turn is one message. Two kinds of traces come from it:

- **facts** (Wunderland's auto-ingest, any role): the memory tasks extract the turn's categorised facts
  under the agent's personality; `engram.cognitive.ingest.select` applies the guide's rules
  (importance >= 0.4, at most 3 per turn, near-duplicates at cosine >= 0.85 skipped and counted as
  verifications, HEXACO adjustments); each kept fact becomes a semantic/prospective/episodic trace;
- **the episode** (AgentOS encodes every user input, `memory.encoding.encodeMessages`): a user
  message becomes an episodic trace of what was said, unless it is a near-duplicate of a trace
  (e.g. of a fact just kept from it, which then stands for it).

Every trace carries provenance to its message (seq and message id, e.g. LoCoMo's "D1:3"), is encoded
by `engram.cognitive.encoding.encode` (personality, mood, flashbulb) and linked to what it follows,
resembles, or names. The traces of a reply carry the question it answers as their `context` (the
previous message of the discussion by another speaker, its question sentences;
`engram.cognitive.indexing`): indexed with them, not part of them. Deduplication and same-topic
links compare what memories say, so this policy's memories embed content alone (`content_vectors`).
Appended to the message's discussion stream with the message's event time: `FactsIngested` (what
was kept and skipped, and why, with the LLM provenance), then `TraceEncoded` and `EdgeAdded` events.
"""

from __future__ import annotations

import numpy as np

from engram.cognitive import ingest, linking, llm_bridge
from engram.cognitive.encoding import encode, trace_id
from engram.cognitive.indexing import reply_context
from engram.cognitive.personality import ingest_rules
from engram.config import defaults as d
from engram.config.agent import AgentConfig
from engram.events.cognitive import FactsIngested, SkippedFact
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import MessageAppended
from engram.policies.cognitive_base import CognitivePolicy

INGESTED_ROLES = frozenset({"user", "assistant", "tool"})


def ingests(cfg: AgentConfig, role: str) -> bool:
    """Whether auto-ingest handles a message of `role` for an agent configured `cfg` (one FactsIngested each)."""
    if role not in INGESTED_ROLES:
        return False
    return cfg.storage.auto_ingest.enabled or (role == "user" and cfg.memory.encoding.encode_messages)
EPISODE_CATEGORY = "message"
# Nearest traces looked at for deduplication and same-topic links.
NEIGHBOURS = 8


class AutoIngest(CognitivePolicy):
    name = "auto-ingest"
    content_vectors = True
    # What deduplication and linking need to know (retrievals and reinforcements do not change it).
    interests = frozenset(
        {
            "MessageAppended", "SettingsChanged", "TraceEncoded", "TracePruned", "ConflictResolved", "EdgeAdded",
            "MoodChanged", "DiscussionForgotten", "AgentForgotten",
        }
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.previous: dict[str, tuple[str, str]] = {}  # stream -> (speaker, text) of its last message

    def state(self):
        return {**super().state(), "previous": dict(self.previous)}

    def restore(self, state) -> None:
        super().restore(state)
        if state:
            self.previous = dict(state.get("previous", {}))

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes: list[Write] = []
        pending: list[Recorded] = []  # trace events to fold before the next decision
        contexts = self._contexts(batch)
        turns = self._extract([r for r in batch if self._is_turn(r)], contexts)
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
                    writes.append(self._turn(rec, *turns[rec.seq]))
            else:
                if rec.type == "DiscussionForgotten":  # its last message goes with it
                    self.previous.pop(rec.event.discussion_id, None)
                elif rec.type == "AgentForgotten":
                    self.previous = {s: v for s, v in self.previous.items() if s not in self._streams_of(rec.agent)}
                pending.append(rec)
        if pending:
            self.fold(pending)
        return writes

    def _streams_of(self, agent: str) -> set[str]:
        mem = self.memories.get(agent)
        return set(mem.last_in_stream) if mem is not None else set()

    def _is_turn(self, rec: Recorded) -> bool:
        return rec.type == "MessageAppended" and self.owns(rec.agent) and ingests(self.config_of(rec.agent), rec.event.role)

    def _contexts(self, batch: list[Recorded]) -> dict[int, str]:
        """The question each message of the batch answers (by seq), in log order; remembers each stream's last message."""
        out = {}
        for rec in batch:
            if rec.type != "MessageAppended" or rec.event.role not in INGESTED_ROLES or not self.owns(rec.agent):
                continue
            speaker = _speaker(rec.event)
            out[rec.seq] = reply_context(self.previous.get(rec.stream), speaker)
            self.previous[rec.stream] = (speaker, rec.event.content)
        return out

    def _extract(self, messages: list[Recorded], contexts: dict[int, str]) -> dict[int, tuple]:
        """Each turn's facts (one memory-task call per turn) and every text's embedding (one call for all)."""
        tasks = self.ctx.tasks if self.ctx.services.get("tasks") is not None else None  # outages wait (base.py)
        extracted, texts = [], []
        for rec in messages:
            cfg = self.config_of(rec.agent)
            facts, llm = [], None
            if cfg.storage.auto_ingest.enabled and tasks is not None:
                # Everything the task finds comes back; `ingest.select` applies the thresholds and records skips.
                result = tasks.extract_facts(
                    [llm_bridge.chat_line(rec)], personality=cfg.personality, importance_threshold=0.0,
                    max_per_turn=d.EXTRACT_MAX_FACTS,
                )
                llm = result.llm
                facts = [
                    ingest.Candidate(category=f.category, content=f.content, importance=f.importance, entities=tuple(f.entities))
                    for f in result.value
                    if f.content.strip()
                ]
            episode = _episode_text(rec) if rec.event.role == "user" and cfg.memory.encoding.encode_messages else None
            texts += [f.content for f in facts] + ([episode] if episode else [])
            extracted.append((rec, facts, episode, llm, contexts.get(rec.seq, "")))
        vectors = self.embed(texts)
        out, k = {}, 0
        for rec, facts, episode, llm, context in extracted:
            n = len(facts) + (1 if episode else 0)
            out[rec.seq] = (facts, episode, vectors[k : k + n], llm, context)
            k += n
        return out

    def _turn(self, rec: Recorded, facts, episode: str | None, vectors: np.ndarray, llm, context: str) -> Write:
        msg: MessageAppended = rec.event
        agent = rec.agent
        cfg = self.config_of(agent)
        rules = ingest_rules(cfg)
        mem = self.memory(agent)
        events: list[NewEvent] = []
        kept_ids: list[str] = []
        selection = ingest.select(facts, vectors[: len(facts)], rules, lambda v: mem.nearest(v, NEIGHBOURS))
        skipped = list(selection.skipped)
        source_type, confidence = ingest.SOURCE_OF_ROLE[msg.role]
        for i, kept in enumerate(selection.kept):
            f = kept.fact
            agent_scoped = f.category in ingest.AGENT_SCOPED
            tid = trace_id(agent, rec.stream, rec.seq, i, f.content)
            events += self._encode(
                rec, tid, f.content, kept.vector, kept.similar, kept.novelty,
                category=f.category, trace_type=ingest.TRACE_TYPE_OF.get(f.category, "episodic"),
                importance=f.importance, entities=f.entities, scope_agent=agent_scoped,
                source_type=source_type, confidence=confidence, tags=("auto-ingest", f.category), context=context,
            )
            kept_ids.append(tid)
        if episode:
            vector = vectors[len(facts)]
            similar = mem.nearest(vector, NEIGHBOURS)
            if similar and similar[0][1] >= rules.dedup_threshold:
                skipped.append(
                    SkippedFact(
                        content=episode, category=EPISODE_CATEGORY, importance=d.EPISODE_BASE_IMPORTANCE,
                        reason="duplicate", duplicate_of=similar[0][0], similarity=round(similar[0][1], 6),
                    )
                )
            else:
                tid = trace_id(agent, rec.stream, rec.seq, "episode")
                entities = tuple(dict.fromkeys(e for f in facts for e in f.entities))
                importance = max([f.importance for f in facts], default=d.EPISODE_BASE_IMPORTANCE)
                events += self._encode(
                    rec, tid, episode, vector, similar, 1.0 - max(0.0, similar[0][1]) if similar else 1.0,
                    category=EPISODE_CATEGORY, trace_type="episodic", importance=importance, entities=entities,
                    scope_agent=False, source_type=source_type, confidence=confidence, tags=("episode",),
                    context=context,
                )
                kept_ids.append(tid)
        # Recorded for every turn, also when nothing was kept: it says auto-ingest has handled the message
        # (the Reflector waits for that before condensing notes of the message).
        summary = FactsIngested(
            source_seq=rec.seq,
            message_id=msg.message_id,
            trace_ids=tuple(kept_ids),
            skipped=tuple(skipped),
            importance_threshold=rules.importance_threshold,
            max_per_turn=rules.max_per_turn,
            dedup_threshold=rules.dedup_threshold,
            llm=llm,
        )
        events.insert(0, NewEvent(event=summary, ts_us=rec.ts_us, event_id=f"ingest:{rec.seq}", causation=rec.seq))
        return Write(stream=rec.stream, agent=agent, events=tuple(events))

    def _encode(
        self, rec: Recorded, tid: str, content: str, vector: np.ndarray, similar, novelty: float, *,
        category: str, trace_type: str, importance: float, entities: tuple[str, ...], scope_agent: bool,
        source_type: str, confidence: float, tags: tuple[str, ...], context: str = "",
    ) -> list[NewEvent]:
        """The TraceEncoded and EdgeAdded events of one new trace, folded at once into this policy's memory."""
        agent = rec.agent
        mem = self.memory(agent)
        trace = encode(
            trace_id=tid,
            content=content,
            config=self.config_of(agent),
            mood=self.mood_of(agent),
            scope="agent" if scope_agent else "discussion",
            scope_id=agent if scope_agent else rec.stream,
            source_type=source_type,
            source_seqs=(rec.seq,),
            source_message_ids=(rec.event.message_id,),
            trace_type=trace_type,
            category=category,
            importance=importance,
            confidence=confidence,
            entities=entities,
            tags=tags,
            emotion=llm_bridge.emotion(content),
            novelty=novelty,
            context=context,
        )
        edges = linking.edges_for(
            tid,
            encoded_us=rec.ts_us,
            previous=mem.last_in_stream.get(rec.stream),
            similar=list(similar),
            sharing_entities=mem.recent_with_entities(entities, exclude=tid),
        )
        new = [NewEvent(event=trace, ts_us=rec.ts_us, event_id=f"trace:{tid}", causation=rec.seq)]
        new += [
            NewEvent(event=e, ts_us=rec.ts_us, event_id=f"edge:{e.src}:{e.dst}:{e.kind}", causation=rec.seq) for e in edges
        ]
        # Decide on what follows knowing this trace; its own events come back later as no-ops.
        mem.apply_batch([_local(rec, n) for n in new], lambda texts: np.asarray(vector, dtype=np.float32).reshape(1, -1))
        return new


def _episode_text(rec: Recorded) -> str | None:
    msg: MessageAppended = rec.event
    text = " ".join(msg.content.split())
    if not text:
        return None
    return f"{_speaker(msg)}: {text}"[: d.EPISODE_MAX_CHARS]


def _speaker(msg: MessageAppended) -> str:
    return msg.name or msg.role.capitalize()


def _local(cause: Recorded, new: NewEvent) -> Recorded:
    """A decided event as this policy folds it before the log returns it (same stream, agent and time)."""
    return Recorded(seq=cause.seq, stream=cause.stream, stream_version=0, agent=cause.agent, ts_us=new.ts_us, event=new.event)

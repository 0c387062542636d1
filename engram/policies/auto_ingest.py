"""After each turn: the facts worth keeping, and the user's message itself, become traces.

A turn is one message. Two kinds of traces come from it:

- **facts** (Wunderland's auto-ingest, any role): the memory tasks extract the turn's categorised facts
  under the agent's personality; `engram.memory.cognitive.ingest.select` applies the guide's rules
  (importance >= 0.4, at most 3 per turn, near-duplicates at cosine >= 0.85 skipped and counted as
  verifications, HEXACO adjustments); each kept fact becomes a semantic/prospective/episodic trace;
- **the episode** (AgentOS encodes every user input, `memory.encoding.encodeMessages`): a user
  message becomes an episodic trace of what was said, unless it is a near-duplicate of a trace
  (e.g. of a fact just kept from it, which then stands for it).

Provenance: facts come from the speaker's own words (`engram.memory.cognitive.llm_bridge.own_words`): the offline
responder's labelled quotes of memory make no trace, and an assistant's fact that restates an existing memory
is skipped as "quoted" (no trace, no verification). Deduplication compares with the traces that were alive
when the message was said (encoded before it and not yet decayed away on their own timelines,
`engram.memory.background.schedule.alive_at`), so what is kept does not depend on the order conversations are
imported in, nor on how far consolidation has got.

Corrections at the turn: each new trace is checked against the active traces naming its entities
(`engram.memory.cognitive.corrections.contradiction`, older and newer by event time whichever arrived first); a
contradiction is recorded at once — `EdgeAdded(contradicts)` newer -> older — and resolved by the
personality rules (`engram.memory.background.conflicts.resolve`): `EdgeAdded(supersedes)` + `ConflictResolved`
(the loser is soft-deleted), or `ConflictResolved(keep_both)`.

Every trace carries provenance to its message (seq and message id, e.g. LoCoMo's "D1:3"), is encoded
by `engram.memory.cognitive.encoding.encode` (personality, mood, flashbulb) and linked to what it follows,
resembles, or names. The traces of a reply carry the question it answers as their `context` (the
previous message of the discussion by another speaker, its question sentences;
`engram.memory.cognitive.indexing`): indexed with them, not part of them. Deduplication and same-topic
links compare what memories say, so this policy's memories embed content alone (`content_vectors`).
Appended to the message's discussion stream with the message's event time: `FactsIngested` (what
was kept and skipped, and why, with the LLM provenance), then the `TraceEncoded` events (each carrying the edges it gets, `links`).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import msgspec
import numpy as np

from engram.config import defaults as d
from engram.config.agent import AgentConfig
from engram.events.cognitive import ConflictResolved, EdgeAdded, FactsIngested, SkippedFact, TraceEncoded, TracePruned
from engram.events.control import DiscussionForgotten
from engram.events.provenance import LlmCall
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import CONVERSATION_ROLES, MessageAppended, MessageEdited, as_appended
from engram.memory.background import schedule
from engram.memory.background.conflicts import Side, resolve
from engram.memory.background.consolidation import interval_us
from engram.memory.cognitive import corrections, ingest, linking, llm_bridge
from engram.memory.cognitive.slots import slots
from engram.memory.cognitive.decay import strength_at
from engram.memory.cognitive.encoding import encode, trace_id
from engram.memory.cognitive.indexing import reply_context
from engram.memory.cognitive.ingest import ingest_rules
from engram.memory.cognitive.memory import AgentMemory
from engram.memory.cognitive.model import MemoryTrace
from engram.policies.base import PolicyContext
from engram.policies.cognitive_base import CognitivePolicy


def ingests(cfg: AgentConfig, role: str) -> bool:
    """Whether auto-ingest handles a message of `role` for an agent configured `cfg` (one FactsIngested each)."""
    if role not in CONVERSATION_ROLES:
        return False
    return cfg.storage.auto_ingest.enabled or (role == "user" and cfg.memory.encoding.encode_messages)
EPISODE_CATEGORY = "message"
# Nearest traces looked at for deduplication and same-topic links.
NEIGHBOURS = 8
# Below a threshold by more than this (an exact scan against hnswlib's own float arithmetic), a similarity
# cannot reach it in a search: the search is skipped.
SIMILARITY_SLACK = 1e-4
# Turns whose texts go to the embedder in one request, as soon as their facts are extracted.
EMBED_CHUNK_TURNS = 64

# The question a message answers (`reply_context`) and the id of the message that asked it, if any.
Context = tuple[str, tuple[str, ...]]


class Extracted(NamedTuple):
    """What a turn's decision starts from (`AutoIngest._extract`): its candidate facts, its episode, their vectors."""

    facts: list[ingest.Candidate]
    episode: str | None  # the user's message as an episode (None: not encoded)
    vectors: np.ndarray  # a row per fact, then the episode's; rows of facts not in `embedded` are zeros
    llm: LlmCall | None  # the extraction's provenance
    context: Context
    embedded: frozenset[int]  # the facts embedded at extraction


class AutoIngest(CognitivePolicy):
    name = "auto-ingest"
    content_vectors = True
    # No `handle_batch`: a long import is decided in one call and its traces appended at its end. Deciding it in
    # parts of 256 turns (the trace index and the consolidator working on each part while the next is decided)
    # was measured on Ray (bench/ingest.py, LoCoMo dev): consolidation then ran between parts and remembered
    # otherwise (360 of 2,726 traces differ by bench/compare_memory.py: other decay, verifications, working
    # memory), so this policy's position stays at the log's head before the import until the import is decided.
    # What deduplication and linking need to know (retrievals and reinforcements do not change it).
    interests = frozenset(
        {
            "MessageAppended", "SettingsChanged", "TraceEncoded", "TracePruned", "ConflictResolved", "EdgeAdded",
            "EdgesAdded", "MoodChanged", "DiscussionForgotten", "AgentForgotten", "MemoryEdited", "MemoryDeleted",
            "MessageEdited", "MessageRemoved",
        }
    )

    def __init__(self, ctx: PolicyContext) -> None:
        super().__init__(ctx)
        # (agent, stream) -> (speaker, text, message id) of its last message (a discussion id is unique within its agent)
        self.previous: dict[tuple[str, str], tuple[str, str, str]] = {}
        self._fades: dict[str, dict[str, tuple[tuple[Any, ...], int | None]]] = {}  # agent -> trace -> (its state, when it fades): a cache

    def state(self) -> Any:
        return {**super().state(), "previous": dict(self.previous)}

    def restore(self, state: Any) -> None:
        super().restore(state)
        if state:
            # A snapshot from before discussion ids per agent keyed this by the id alone: its entries are dropped (a
            # discussion's next message then has no question context, as after a restart without a snapshot).
            self.previous = {k: v for k, v in state.get("previous", {}).items() if isinstance(k, tuple)}

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes: list[Write] = []
        pending: list[Recorded] = []  # trace events to fold before the next decision
        # An edited message is a turn again, in its new words (`as_appended`, at the edit's seq and time): its traces
        # replace those of the old words, which the book supersedes when it folds the edit (before the turn's
        # decision, so the old words neither deduplicate nor contradict the new).
        edited = {r.seq: self._edited_turn(r) for r in batch if r.type == "MessageEdited" and self.owns(r.agent)}
        said = {seq: r for seq, r in edited.items() if r is not None}
        contexts = self._contexts(batch)
        turns = self._extract([said.get(r.seq, r) for r in batch if self._is_turn(said.get(r.seq, r))], contexts)
        for rec in batch:
            if rec.type == "SettingsChanged":
                self.settings.apply(rec)
            elif not self.owns(rec.agent):
                continue
            elif rec.type in ("MessageAppended", "MessageEdited"):
                if rec.type == "MessageEdited":
                    pending.append(rec)
                if pending:
                    self.fold(pending)
                    pending = []
                if rec.seq in turns:
                    writes.append(self._turn(said.get(rec.seq, rec), turns[rec.seq]()))
            else:
                if isinstance(rec.event, DiscussionForgotten):  # its last message goes with it
                    self.previous.pop((rec.agent, rec.event.discussion_id), None)
                elif rec.type == "AgentForgotten":
                    self.previous = {k: v for k, v in self.previous.items() if k[0] != rec.agent}
                pending.append(rec)
        if pending:
            self.fold(pending)
        # The questions the replies' traces answer (their index vectors combine the question's embedding with the
        # content's, `engram.memory.cognitive.indexing`): the home's embedder computes them while the log takes the traces,
        # before the trace index and the reader ask for them.
        self.prefetch([n.event.context.strip() for w in writes for n in w.events
                       if isinstance(n.event, TraceEncoded) and n.event.context.strip()])
        return writes

    def _edited_turn(self, rec: Recorded) -> Recorded | None:
        """An edit as the message it makes (`engram.events.messages.as_appended`), from the message in the log."""
        read = self.ctx.read
        edit = rec.event
        if read is None or not isinstance(edit, MessageEdited):
            return None
        original = [r.event for r in read(0, limit=None, stream=rec.stream, types=["MessageAppended"], to_seq=rec.seq)
                    if isinstance(r.event, MessageAppended) and r.event.message_id == edit.message_id]
        return as_appended(rec, original[0]) if original else None

    def _is_turn(self, rec: Recorded) -> bool:
        return (isinstance(rec.event, MessageAppended) and self.owns(rec.agent)
                and ingests(self.config_of(rec.agent), rec.event.role))

    def _contexts(self, batch: list[Recorded]) -> dict[int, Context]:
        """The question each message of the batch answers (by seq), in log order; remembers each stream's last message."""
        out: dict[int, Context] = {}
        for rec in batch:
            msg = rec.event
            if not isinstance(msg, MessageAppended) or msg.role not in CONVERSATION_ROLES or not self.owns(rec.agent):
                continue
            speaker = _speaker(msg)
            before = self.previous.get((rec.agent, rec.stream))
            context = reply_context(before[:2] if before else None, speaker)
            out[rec.seq] = (context, (before[2],) if context and before and len(before) > 2 and before[2] else ())
            self.previous[(rec.agent, rec.stream)] = (speaker, msg.content, msg.message_id)
        return out

    def _extract(self, messages: list[Recorded], contexts: dict[int, Context]) -> dict[int, Callable[[], Extracted]]:
        """Each turn's facts (one memory-task call per turn) and their embeddings, by seq: a function that
        returns them. Embeddings are requested for every EMBED_CHUNK_TURNS turns as soon as those are
        extracted, so the home's embedder computes while the next turns are extracted and decided."""
        out: dict[int, Callable[[], Extracted]] = {}
        for start in range(0, len(messages), EMBED_CHUNK_TURNS):
            out.update(self._extract_chunk(messages[start : start + EMBED_CHUNK_TURNS], contexts))
        return out

    def _extract_chunk(self, messages: list[Recorded],
                       contexts: dict[int, Context]) -> dict[int, Callable[[], Extracted]]:
        tasks = self.ctx.tasks if self.ctx.services.get("tasks") is not None else None  # outages wait (base.py)
        extracted: list[tuple[Recorded, list[ingest.Candidate], list[int], str | None, LlmCall | None, Context]] = []
        texts: list[str] = []
        for rec in messages:
            msg = rec.event
            assert isinstance(msg, MessageAppended)  # a turn (`_is_turn`)
            cfg = self.config_of(rec.agent)
            facts: list[ingest.Candidate] = []
            llm: LlmCall | None = None
            line = llm_bridge.chat_line(rec)  # the speaker's own words (the assistant's quotes of memory are not)
            if cfg.storage.auto_ingest.enabled and tasks is not None and line.content.strip():
                # Everything the task finds comes back; `ingest.select` applies the thresholds and records skips.
                result = tasks.extract_facts(
                    [line], personality=cfg.personality, importance_threshold=0.0,
                    max_per_turn=d.EXTRACT_MAX_FACTS,
                )
                llm = result.llm
                # Typed by who said it: the assistant's statements are not the user's preferences or goals.
                facts = [
                    ingest.Candidate(category=ingest.category_of(msg.role, f.category), content=f.content,
                                     importance=f.importance, entities=tuple(f.entities))
                    for f in result.value
                    if f.content.strip()
                ]
            episode = _episode_text(msg) if msg.role == "user" and cfg.memory.encoding.encode_messages else None
            # Only what `ingest.select` will compare is embedded: a fact skipped for its category or importance needs no vector.
            rules = ingest_rules(cfg)
            rows = [i for i, f in enumerate(facts) if ingest.unembedded_skip(f, rules) is None]
            texts += [facts[i].content for i in rows] + ([episode] if episode else [])
            extracted.append((rec, facts, rows, episode, llm, contexts.get(rec.seq, ("", ()))))
        vectors = self.embed_async(texts)

        def turn_of(k: int, facts: list[ingest.Candidate], rows: list[int], episode: str | None, llm: LlmCall | None,
                    context: Context) -> Callable[[], Extracted]:
            def turn() -> Extracted:
                computed = vectors()
                own = np.zeros((len(facts) + (1 if episode else 0), computed.shape[1]), dtype=np.float32)
                own[rows] = computed[k : k + len(rows)]
                if episode:
                    own[len(facts)] = computed[k + len(rows)]
                return Extracted(facts, episode, own, llm, context, frozenset(rows))

            return turn

        out: dict[int, Callable[[], Extracted]] = {}
        k = 0
        for rec, facts, rows, episode, llm, context in extracted:
            out[rec.seq] = turn_of(k, facts, rows, episode, llm, context)
            k += len(rows) + (1 if episode else 0)
        return out

    def _turn(self, rec: Recorded, extracted: Extracted) -> Write:
        facts, episode, vectors, llm, (context, context_ids), embedded = extracted
        msg = rec.event
        assert isinstance(msg, MessageAppended)  # a turn (`_is_turn`)
        agent = rec.agent
        cfg = self.config_of(agent)
        rules = ingest_rules(cfg)
        mem = self.memory(agent)
        events: list[NewEvent] = []
        kept_ids: list[str] = []
        # The user saying who they are: such a fact is worth keeping, and its traces carry the name (profile).
        name = ingest.stated_name(msg.content) if msg.role == "user" else None
        name_tags = (f"{ingest.NAME_TAG}{name}",) if name else ()
        if name:
            facts = [
                ingest.Candidate(f.category, f.content, max(f.importance, ingest.IDENTITY_IMPORTANCE), f.entities)
                if name in f.content else f
                for f in facts
            ]
        # Settings recorded in the same batch (or a stated name) may let through a fact the rules at
        # extraction skipped: embed it now.
        late = [i for i, f in enumerate(facts) if i not in embedded and ingest.unembedded_skip(f, rules) is None]
        if late:
            vectors = vectors.copy()
            vectors[late] = self.embed([facts[i].content for i in late])
        alive = self._alive_at(agent, rec.ts_us)
        selection = ingest.select(facts, vectors[: len(facts)], rules, lambda v: mem.nearest(v, NEIGHBOURS, alive),
                                  quoting=msg.role == "assistant")
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
                source_type=source_type, confidence=confidence, tags=("auto-ingest", f.category) + name_tags,
                context=context, context_ids=context_ids,
            )
            kept_ids.append(tid)
        if episode:
            vector = vectors[len(facts)]
            similar = mem.nearest(vector, NEIGHBOURS, alive)
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
                    scope_agent=False, source_type=source_type, confidence=confidence, tags=("episode",) + name_tags,
                    context=context, context_ids=context_ids,
                )
                kept_ids.append(tid)
        events += self._later_duplicates(rec, kept_ids, rules.dedup_threshold)
        events += self._corrections(rec, kept_ids)
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

    def _alive_at(self, agent: str, at_us: int) -> Callable[[str], bool]:
        """Traces a message said at `at_us` can duplicate: encoded by then and alive then on their own timelines."""
        cfg = self.config_of(agent)
        traces = self.memory(agent).book.traces
        every, threshold = interval_us(cfg), cfg.memory.decay.prune_threshold
        decays = cfg.memory.consolidation.enabled
        fades = self._fades.setdefault(agent, {})

        def allowed(tid: str) -> bool:
            t = traces.get(tid)
            if t is None or t.encoded_us > at_us:
                return False
            if not (decays and t.active):
                return t.active or (t.deleted_us is not None and t.deleted_us > at_us)
            known = fades.get(tid)
            if known is None or known[0] != (t.last_seq, t.last_access_us, every, threshold):
                # When it fades on its own timeline, cached until the trace changes (the HNSW filter asks often).
                known = fades[tid] = ((t.last_seq, t.last_access_us, every, threshold),
                                      schedule.fades_at(t, every, threshold))
            return known[1] is None or known[1] > at_us

        return allowed

    def _later_duplicates(self, rec: Recorded, new_ids: list[str], threshold: float) -> list[NewEvent]:
        """Traces encoded after this message (a later conversation imported first) that restate one of its new
        traces: live, they would have been skipped as duplicates of it, so they are retired now (soft-deleted,
        reason "restates <earlier trace>") and what is remembered does not depend on the import order."""
        agent = rec.agent
        mem = self.memory(agent)
        traces = mem.book.traces
        out: list[NewEvent] = []
        if mem.book.latest_encoded_us <= rec.ts_us:
            return out  # nothing was said after this message (the usual, chronological import): no search
        for tid in new_ids:
            if tid not in mem.index:
                continue
            vector = mem.index.vectors([tid])[0]
            if mem.index.most_similar(vector, exclude=new_ids) < threshold - SIMILARITY_SLACK:
                continue  # nothing anywhere in the memory is that similar: the filtered search below finds nothing to retire

            def later(oid: str) -> bool:
                t = traces.get(oid)
                return (t is not None and t.active and t.encoded_us > rec.ts_us and oid not in new_ids
                        and rec.seq not in t.source_seqs)

            alive: Callable[[str], bool] | None = None
            for oid, sim in mem.nearest(vector, NEIGHBOURS, later):
                if sim < threshold or not traces[oid].active:
                    continue
                t = traces[oid]
                alive = alive or self._alive_at(agent, t.encoded_us)
                if not alive(tid):
                    continue  # live, this trace would have faded before the later one was said: no duplicate
                pruned = TracePruned(trace_id=oid, strength=round(strength_at(t, rec.ts_us), 6),
                                     reason=f"restates earlier {tid}")
                new = NewEvent(event=pruned, ts_us=rec.ts_us, causation=rec.seq, event_id=f"restated:{oid}:{tid}")
                mem.apply_batch([_local(rec, new)], lambda texts: np.zeros((len(texts), mem.dim), np.float32))
                out.append(new)
        return out

    @staticmethod
    def _related(mem: AgentMemory, x: MemoryTrace) -> list[str]:
        """The traces a new one may contradict, found the same way whichever arrived first: those naming one of
        its subjects (named things other than its speaker) and those on the same topic (content cosine >=
        SAME_TOPIC_SIMILARITY), active, in id order."""
        out = set(mem.recent_with_entities(corrections.subjects(x), exclude=x.trace_id))
        if slots(x.content):  # a fact with a slot: the recent facts naming its speaker may hold another value of it
            said = corrections.speaker_key(x.content)
            mine = mem.recent_with_entities([said], exclude=x.trace_id)[:d.SLOT_CANDIDATES] if said else []
            out |= {oid for oid in mine if slots(mem.book.traces[oid].content)}
        if x.trace_id in mem.index:
            vector = mem.index.vectors([x.trace_id])[0]
            out |= {oid for oid, sim in mem.nearest(vector, 4 * NEIGHBOURS) if sim >= d.SAME_TOPIC_SIMILARITY}
        out.discard(x.trace_id)
        return sorted(out)

    def _corrections(self, rec: Recorded, new_ids: list[str]) -> list[NewEvent]:
        """Contradictions between this turn's traces and the active traces naming their entities, recorded and
        resolved at once (see the module docstring)."""
        agent = rec.agent
        mem = self.memory(agent)
        traces = mem.book.traces
        personality = self.config_of(agent).personality
        out: list[NewEvent] = []
        for tid in new_ids:
            x = traces.get(tid)
            if x is None or not x.active or not x.entities:
                continue
            for oid in self._related(mem, x):
                y = traces[oid]
                if not (x.active and y.active) or set(y.source_seqs) & set(x.source_seqs):
                    continue  # gone meanwhile, or the same message said both
                older, newer = (y, x) if schedule.time_order(y) < schedule.time_order(x) else (x, y)
                reason = corrections.contradiction(older, newer)
                if reason is None or not self._alive_at(agent, newer.encoded_us)(older.trace_id):
                    continue  # no conflict, or the older memory had faded before the newer one was said
                res = resolve(personality, Side(older.trace_id, older.encoded_us, older.confidence, schedule.time_order(older)),
                              Side(newer.trace_id, newer.encoded_us, newer.confidence, schedule.time_order(newer)))
                decided: list[EdgeAdded | ConflictResolved] = [EdgeAdded(src=newer.trace_id, dst=older.trace_id, kind="contradicts",
                                     weight=d.CONTRADICTION_EDGE_WEIGHT)]
                if res.loser is None:
                    decided.append(ConflictResolved(winner=newer.trace_id, loser=older.trace_id, resolution=res.how,
                                                    note=f"{reason}: both kept, discrepancy recorded at the turn"))
                else:
                    decided.append(EdgeAdded(src=res.winner, dst=res.loser, kind="supersedes",
                                             weight=d.SUPERSEDES_EDGE_WEIGHT))
                    decided.append(ConflictResolved(winner=res.winner, loser=res.loser, resolution=res.how,
                                                    note=f"{reason}: resolved at the turn"))
                new = [NewEvent(event=e, ts_us=rec.ts_us, causation=rec.seq, event_id=_decision_id(e)) for e in decided]
                mem.apply_batch([_local(rec, n) for n in new], lambda texts: np.zeros((len(texts), mem.dim), np.float32))
                out += new
        return out

    def _encode(
        self, rec: Recorded, tid: str, content: str, vector: np.ndarray, similar: Sequence[tuple[str, float]],
        novelty: float, *,
        category: str, trace_type: str, importance: float, entities: tuple[str, ...], scope_agent: bool,
        source_type: str, confidence: float, tags: tuple[str, ...], context: str = "", context_ids: tuple[str, ...] = (),
    ) -> list[NewEvent]:
        """The TraceEncoded event of one new trace (with its edges), folded at once into this policy's memory."""
        agent = rec.agent
        msg = rec.event
        assert isinstance(msg, MessageAppended)  # a turn (`_is_turn`)
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
            source_message_ids=(msg.message_id,),
            trace_type=trace_type,
            category=category,
            importance=importance,
            confidence=confidence,
            entities=entities,
            tags=tags,
            emotion=llm_bridge.emotion(content),
            novelty=novelty,
            context=context,
            context_message_ids=context_ids,
        )
        links = linking.edges_for(
            tid,
            encoded_us=rec.ts_us,
            previous=mem.last_in_stream.get(rec.stream),
            similar=list(similar),
            sharing_entities=mem.recent_with_entities(entities, exclude=tid),
        )
        new = [NewEvent(event=msgspec.structs.replace(trace, links=links), ts_us=rec.ts_us, event_id=f"trace:{tid}",
                        causation=rec.seq)]
        # Decide on what follows knowing this trace; its own events come back later as no-ops.
        mem.apply_batch([_local(rec, n) for n in new], lambda texts: np.asarray(vector, dtype=np.float32).reshape(1, -1))
        return new


def _episode_text(msg: MessageAppended) -> str | None:
    text = " ".join(msg.content.split())
    if not text:
        return None
    return f"{_speaker(msg)}: {text}"[: d.EPISODE_MAX_CHARS]


def _speaker(msg: MessageAppended) -> str:
    return msg.name or msg.role.capitalize()


def _decision_id(e: EdgeAdded | ConflictResolved) -> str:
    if isinstance(e, EdgeAdded):
        return f"edge:{e.src}:{e.dst}:{e.kind}"
    return f"conflict:{e.winner}:{e.loser}:{e.resolution}"


def _local(cause: Recorded, new: NewEvent) -> Recorded:
    """A decided event as this policy folds it before the log returns it (same stream, agent and time)."""
    return Recorded(seq=cause.seq, stream=cause.stream, stream_version=0, agent=cause.agent, ts_us=new.ts_us, event=new.event)

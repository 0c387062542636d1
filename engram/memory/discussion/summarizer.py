"""The Summarizer of one discussion: a logical actor that turns message events into memory events.

It holds the discussion's small state (generation, per-store progress, the rolling summary it has
written) and reacts to the discussion's events in log order:

- `MessageAppended`: a memory check of the chunk-memory store and, when `useVectorForQualityMemory`
  is true, of the vector-memory store (each with its own thresholds; see `chunking`).
- `GenerationStarted` (regeneration): everything starts over without a store (consolidation mode),
  from the full history, and the check runs at once.
- `SummaryUpdateRequested` (chatSummarySummarizer, FullChatSummary): the merge loop (see `rolling`).
- `MemoryEdited` of a chunk memory the rolling summary has absorbed: the summary is written again from the
  chunk memories as they are now (an edit supersedes: the summary must not keep the old words). Chunk memories are
  always read with their edits (`MemoryLog.chunk_memories`), so one absorbed later is merged in its edited form.

Its decisions only depend on the events it has seen and the settings in force (folded from
`SettingsChanged` by the host). Every event it emits has a deterministic id, so handling the
same events again after a restart appends nothing twice. LLM work goes through `MemoryTasks`;
its output and provenance travel inside the emitted event, so replay never calls an LLM.

A vector memory is emitted without its embedding: the host fills in the embeddings of all the
memories it is about to append with one call to the embedder service (`embed_pending`), so
embedding goes in batches, and the recorded vector is what search and replay use.

No Ray, no I/O of its own, no clock: the host gives it the log reader, the memory tasks, the
memory-workflow runner and a sink for its events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, Sequence, cast

import msgspec
import numpy as np

from engram.config import defaults as d
from engram.config.discussion import DEFAULT_PROMPT, DEFAULT_SYSTEM_PROMPT, DiscussionSettings
from engram.events.control import GenerationStarted
from engram.events.discussion import (
    ChunkSummarized,
    MemoryFileCreated,
    RollingSummaryUpdated,
    STORE_MEMORIES,
    STORE_VECTOR,
    SummaryUpdateRequested,
    VectorMemoryStored,
)
from engram.events.envelope import NewEvent, Recorded
from engram.events.memory_edits import MemoryEdited
from engram.events.messages import MessageAppended, MessageEdited, MessageRemoved
from engram.events.provenance import LlmCall
from engram.memory.discussion.chunking import Chunk, Msg, Thresholds, memory_check
from engram.memory.discussion.files import chunk_memory_id
from engram.memory.discussion.rolling import MergePolicy, plan_merges
from engram.memory.discussion.state import DiscussionState, StoreState, SummaryState
from engram.memory.discussion.vectors import encode_vector
from engram.providers.llm.offline.respond import labelled
from engram.providers.llm.provenance import injected_memory, own_words
from engram.providers.llm.types import ChatLine, StructuredMemory

if TYPE_CHECKING:
    from engram.providers.embeddings.base import Embedder
    from engram.providers.llm.tasks import MemoryTasks


class MemoryLog(Protocol):
    """What the Summarizer reads back from the log (through its host)."""

    def messages(self, discussion: str, after_seq: int, to_seq: int) -> list[Msg]: ...

    def chunk_memories(self, discussion: str, after_seq: int, edits_through: int | None = None) -> list[Recorded]:
        """The discussion's ChunkSummarized events after `after_seq`, each with the text of its latest
        `MemoryEdited` up to `edits_through` (`engram.memory.discussion.files.with_edits`)."""
        ...

    def vector_memories(self, discussion: str) -> list[Recorded]: ...

    def memory_edits(self, discussion: str) -> list[Recorded]:
        """The discussion's `MemoryEdited` events (a user's, or the Summarizer's after a message changed)."""
        ...

    def history(self, discussion: str, to_seq: int | None = None) -> list[Recorded]:
        """The discussion's own events up to `to_seq` (None: all of them; messages, generations, memory events)."""
        ...


class MemoryWorkflows(Protocol):
    """Runs the workflow a setting names (`fileMemoryWorkflowName`, `vectorMemoryWorkflowName`);
    its Standard nodes that name no endpoint/preset use `endpoint_name`/`preset`."""

    def run(self, name: str, inputs: dict[str, str], *, endpoint_name: str | None = None,
            preset: str | None = None) -> "WorkflowOutcome": ...


@dataclass(frozen=True)
class WorkflowOutcome:
    text: str | None  # the workflow's final output; None if it could not be used
    tag: str | None  # "<name>@<content hash>" of the workflow that ran
    error: str | None  # why the workflow's output was not used
    llm: LlmCall | None = None  # the LlmCall of its last LLM node


def to_msg(rec: Recorded) -> Msg:
    """The message as discussion memory reads it: in its speaker's own words (`engram.providers.llm.provenance.own_words`:
    the assistant's quotes of the memory injected for its turn, and the offline responder's labelled replies, are not
    its words, so a summary never attributes a quoted fact to the assistant); its tokens are the whole message's."""
    ev = rec.event
    assert isinstance(ev, MessageAppended)
    content = own_words(ev.role, ev.content, injected_memory(ev.metadata))
    return Msg(rec.seq, ev.message_id, ev.role, content, ev.token_estimate, rec.ts_us, ev.name)


def _chunk(rec: Recorded) -> ChunkSummarized:
    """A chunk memory the log gave back (`MemoryLog.chunk_memories` answers only ChunkSummarized records)."""
    assert isinstance(rec.event, ChunkSummarized), rec.type
    return rec.event


def spoken(messages: Sequence[Msg]) -> list[Msg]:
    """The messages a memory is made of: those with words of their own (`to_msg`; issue 24: what the system says
    about itself — "[offline heuristic, not a language model] Nothing in the memory context matches…", or its quotes
    of memories, which a summary would attribute to the assistant — never becomes a memory). They stay in the log and
    in the chunk's span (its seqs, message ids and tokens), so chunk boundaries are as before. (A message kept from
    before `to_msg` read own words, in a summarizer's snapshot, is checked for the responder's label here.)"""
    return [m for m in messages if m.content.strip() and not labelled(m.role, m.content)]


def chat_lines(messages: Sequence[Msg]) -> list[ChatLine]:
    return [ChatLine(role=m.role, content=m.content, seq=m.seq, ts_us=m.ts_us, message_id=m.message_id, name=m.name)
            for m in spoken(messages)]


def transcript(messages: Sequence[Msg]) -> str:
    """A chunk as text for a memory workflow's `[TextChunk]` / `{chunk}`."""
    return "\n".join(f"{m.name or m.role.capitalize()}: {m.content}" for m in spoken(messages))


Emit = Callable[[NewEvent], None]


class DiscussionSummarizer:
    """The logical actor of one discussion (serial: its host never runs two of its calls at once)."""

    def __init__(self, state: DiscussionState, *, tasks: MemoryTasks, log: MemoryLog,
                 workflows: MemoryWorkflows | None = None) -> None:
        self.state = state
        self.tasks = tasks
        self.log = log
        self.workflows = workflows

    # ------------------------------------------------------------------ events

    def on_message(self, rec: Recorded, settings: DiscussionSettings, emit: Emit) -> None:
        if rec.seq <= self.state.decided_through:
            return
        st = self.state
        msg = to_msg(rec)
        st.message_count += 1
        self._check(STORE_MEMORIES, rec, settings, emit, new=msg)
        if settings.use_vector_for_quality_memory:
            self._check(STORE_VECTOR, rec, settings, emit, new=msg)
        else:
            st.vectors.pending = None  # not kept while unused; reloaded from the log if turned on

    def on_message_change(self, rec: Recorded, settings: DiscussionSettings, emit: Emit) -> None:
        """A message edited or removed (`MessageEdited`, `MessageRemoved`): what was made from its old words is said
        again from the conversation as it holds now — each chunk memory and vector memory of the current generation
        that holds the message gets a `MemoryEdited` with its new text (the old stays in the log), the rolling
        summary is merged again when it absorbed one of them, and messages not yet in a memory read the new words."""
        ev = rec.event
        assert isinstance(ev, (MessageEdited, MessageRemoved))
        st = self.state
        if rec.seq <= st.decided_through:
            return
        for ss in (st.memories, st.vectors):
            # Read again whether or not the message is pending: an edit may bring back one removed before (a swipe back).
            if ss.pending is not None:
                ss.pending = self.log.messages(st.discussion, ss.marker, rec.seq)
        resaid: list[tuple[str, str]] = []  # (chunk memory id, its new text)
        for r in self.log.chunk_memories(st.discussion, 0):
            chunk = _chunk(r)
            if chunk.generation != st.generation or ev.message_id not in chunk.message_ids:
                continue
            messages = self._now(chunk.first_seq, chunk.last_seq, rec.seq)
            if not messages:
                continue  # nothing of the chunk is left to say: its memory stays as the log made it
            summary, _, _ = self._chunk_summary(messages, settings)
            if not summary.strip():
                continue  # nothing left worth a memory (e.g. only the offline responder's words): it stays as made
            memory_id = chunk_memory_id(chunk)
            emit(NewEvent(MemoryEdited(kind="chunk", memory_id=memory_id, content=summary), rec.ts_us,
                          f"resaid:{rec.seq}:{memory_id}", rec.seq))
            resaid.append((memory_id, summary))
            st.recent = [summary if old == chunk.summary else old for old in st.recent]
        for r in self.log.vector_memories(st.discussion):
            vector = r.event
            assert isinstance(vector, VectorMemoryStored), r.type
            if vector.generation != st.generation or ev.message_id not in vector.message_ids:
                continue
            messages = self._now(vector.first_seq, vector.last_seq, rec.seq)
            if not messages:
                continue
            result = self.tasks.extract_memory(chat_lines(messages),
                                               max_tokens=settings.vector_memory_max_response_size_in_tokens,
                                               endpoint_name=settings.vector_memory_endpoint_name or settings.endpoint_name,
                                               preset=settings.vector_memory_preset or settings.preset)
            said = result.value
            if said.summary.strip():
                emit(NewEvent(MemoryEdited(kind="vector", memory_id=vector.memory_id, content=said.summary,
                                           title=said.title, entities=tuple(said.entities),
                                           key_phrases=tuple(said.key_phrases), embedding=PENDING),
                              rec.ts_us, f"resaid:{rec.seq}:{vector.memory_id}", rec.seq))
        absorbed = [m for m, _ in resaid if st.summary.absorbed_through and self._absorbed(m)]
        if absorbed:
            self._merge_again(rec, settings, emit, dict(resaid))

    def _now(self, first_seq: int, last_seq: int, through_seq: int) -> list[Msg]:
        """The messages of a chunk (seqs first..last) as the conversation holds them at `through_seq`."""
        return [m for m in self.log.messages(self.state.discussion, first_seq - 1, through_seq) if m.seq <= last_seq]

    def _absorbed(self, memory_id: str) -> bool:
        return any(chunk_memory_id(_chunk(r)) == memory_id and _chunk(r).last_seq <= self.state.summary.absorbed_through_seq
                   for r in self.log.chunk_memories(self.state.discussion, 0))

    def _merge_again(self, rec: Recorded, settings: DiscussionSettings, emit: Emit, resaid: dict[str, str]) -> None:
        """The rolling summary merged again from every chunk memory it had absorbed, in their texts now."""
        st = self.state
        edits = [r.event for r in self.log.memory_edits(st.discussion) if isinstance(r.event, MemoryEdited)]
        now = {e.memory_id: e.content for e in edits if e.kind == "chunk" and e.content is not None}  # latest wins
        now.update(resaid)
        chunks = [_chunk(r) for r in self.log.chunk_memories(st.discussion, 0)]
        texts = [now.get(chunk_memory_id(c), c.summary) for c in chunks
                 if c.generation == st.generation and c.last_seq <= st.summary.absorbed_through_seq]
        if not texts:
            return
        result = self.tasks.merge_summary("", texts, max_tokens=settings.max_response_size_in_tokens,
                                          endpoint_name=settings.endpoint_name, preset=settings.preset)
        event = RollingSummaryUpdated(
            generation=st.generation, summary=result.value, absorbed_through=st.summary.absorbed_through,
            absorbed_through_seq=st.summary.absorbed_through_seq, memories_merged=len(texts),
            memories_absorbed=st.summary.absorbed, merged_memory_ids=(), llm=result.llm, node="message edit",
        )
        emit(NewEvent(event, rec.ts_us, f"summary:g{st.generation}:{st.summary.absorbed_through}:resaid:{rec.seq}",
                      rec.seq))
        st.summary.text = result.value

    def on_generation(self, rec: Recorded, settings: DiscussionSettings, emit: Emit) -> None:
        ev = rec.event
        assert isinstance(ev, GenerationStarted)
        st = self.state
        if ev.generation <= st.generation or rec.seq <= st.decided_through:
            return
        if ev.batch is not None:
            self._adopt_batch(rec)
            return
        st.generation = ev.generation
        st.memories, st.vectors, st.summary, st.recent = StoreState(pending=None), StoreState(pending=None), SummaryState(), []
        self._check(STORE_MEMORIES, rec, settings, emit)
        if settings.use_vector_for_quality_memory:
            self._check(STORE_VECTOR, rec, settings, emit)

    def _adopt_batch(self, rec: Recorded) -> None:
        """A generation regenerated through the Message Batches API: its memory events were appended with
        `GenerationStarted` (one write, no causation), decided already. The state becomes what the log shows
        after that write; every later message is handled as usual (its check reads what came in meanwhile)."""
        from engram.memory.discussion.state import OWN_TYPES, recover_state

        assert isinstance(rec.event, GenerationStarted), rec.type
        generation = rec.event.generation
        history = self.log.history(self.state.discussion)
        written = [r for r in history if r.seq > rec.seq and r.type in OWN_TYPES and r.causation is None
                   and getattr(r.event, "generation", None) == generation]
        adopted = recover_state(self.state.agent, self.state.discussion,
                                [r for r in history if r.seq <= rec.seq] + written)
        adopted.decided_through = max([rec.seq] + [r.seq for r in written])
        for name, value in vars(adopted).items():
            setattr(self.state, name, value)

    def on_summary_request(self, rec: Recorded, settings: DiscussionSettings, emit: Emit,
                           flush: Callable[[], None]) -> None:
        ev = rec.event
        assert isinstance(ev, SummaryUpdateRequested)
        st = self.state
        if rec.seq <= st.decided_through:
            return
        waiting = [
            r for r in self.log.chunk_memories(st.discussion, st.summary.cursor, rec.seq)
            if _chunk(r).generation == st.generation
            and st.summary.absorbed_through_seq < _chunk(r).last_seq < rec.seq
        ]
        policy = MergePolicy(ev.min_memories_per_summary, ev.loop_if_memories_exceed)
        self._merge(waiting, plan_merges(len(waiting), policy), rec, ev, settings, emit, flush,
                    f"summary:g{st.generation}:")

    def on_memory_edit(self, rec: Recorded, settings: DiscussionSettings, emit: Emit,
                       flush: Callable[[], None]) -> None:
        """A chunk memory the rolling summary absorbed has a new text: the summary is written again, from nothing,
        over the same chunk memories as they are now (in batches of the guide's `loopIfMemoriesExceed`, with the
        built-in prompt and the settings' endpoint: the edit names no workflow node). A chunk memory not absorbed
        yet needs nothing: it is merged in its edited form when its turn comes."""
        ev = rec.event
        assert isinstance(ev, MemoryEdited)
        st = self.state
        if rec.seq <= st.decided_through or ev.kind != "chunk" or ev.content is None or not st.summary.absorbed:
            return
        absorbed = [r for r in self.log.chunk_memories(st.discussion, 0, rec.seq)
                    if _chunk(r).generation == st.generation and _chunk(r).last_seq <= st.summary.absorbed_through_seq]
        if ev.memory_id not in {chunk_memory_id(_chunk(r)) for r in absorbed}:
            return
        loop = d.LOOP_IF_MEMORIES_EXCEED
        sizes = [min(loop, len(absorbed) - i) for i in range(0, len(absorbed), loop)]
        request = SummaryUpdateRequested(node="memoryEdited", min_memories_per_summary=1, loop_if_memories_exceed=loop)
        st.summary = SummaryState()
        self._merge(absorbed, sizes, rec, request, settings, emit, flush, f"summary:g{st.generation}:edit{rec.seq}:")

    def _merge(self, waiting: list[Recorded], sizes: list[int], rec: Recorded, ev: SummaryUpdateRequested,
               settings: DiscussionSettings, emit: Emit, flush: Callable[[], None], id_prefix: str) -> None:
        """Merge `waiting` (oldest first) into the rolling summary in batches of `sizes`, one event a batch."""
        st = self.state
        max_tokens = ev.max_response_size_in_tokens or settings.max_response_size_in_tokens
        for size in sizes:
            batch, waiting = waiting[:size], waiting[size:]
            result = self.tasks.merge_summary(
                st.summary.text, [_chunk(r).summary for r in batch], max_tokens=max_tokens,
                system_prompt=ev.system_prompt, prompt=ev.prompt,
                endpoint_name=ev.endpoint_name or settings.endpoint_name, preset=ev.preset or settings.preset,
            )
            last = _chunk(batch[-1])
            last_id = chunk_memory_id(last)
            st.summary.absorbed += len(batch)
            event = RollingSummaryUpdated(
                generation=st.generation, summary=result.value, absorbed_through=last_id,
                absorbed_through_seq=last.last_seq, memories_merged=len(batch),
                memories_absorbed=st.summary.absorbed, merged_memory_ids=tuple(chunk_memory_id(_chunk(r)) for r in batch),
                llm=result.llm, node=ev.node,
            )
            emit(NewEvent(event, rec.ts_us, f"{id_prefix}{last_id}", rec.seq))
            st.summary.text = result.value
            st.summary.absorbed_through, st.summary.absorbed_through_seq = last_id, last.last_seq
            st.summary.cursor = batch[-1].seq
            flush()  # save after each batch

    def adopt_summary(self, rec: Recorded) -> None:
        """Our own RollingSummaryUpdated came back from the log: the logged text is the truth
        (after a restart it may differ from a re-run that the log refused as a duplicate)."""
        ev = rec.event
        assert isinstance(ev, RollingSummaryUpdated), rec.type
        s = self.state.summary
        if ev.generation == self.state.generation and ev.absorbed_through == s.absorbed_through:
            s.text = ev.summary

    # ------------------------------------------------------------------ checks

    def _check(self, store: str, rec: Recorded, settings: DiscussionSettings, emit: Emit, new: Msg | None = None) -> None:
        st = self.state
        ss = st.memories if store == STORE_MEMORIES else st.vectors
        if ss.pending is None:
            ss.pending = self.log.messages(st.discussion, ss.marker, rec.seq)
        elif new is not None:
            ss.pending.append(new)
        th = Thresholds.file_memories(settings) if store == STORE_MEMORIES else Thresholds.vector_memories(settings)
        check = memory_check(store_exists=ss.created, message_count=st.message_count, pending=ss.pending, th=th)
        if not check.ran:
            return
        assert check.mode is not None  # a check that ran chose its mode
        if check.create_store:
            created = MemoryFileCreated(generation=st.generation, store=store, message_count=st.message_count)
            emit(NewEvent(created, rec.ts_us, f"created:{store}:g{st.generation}", rec.seq))
            ss.created = True
        for chunk in check.chunks:
            if store == STORE_MEMORIES:
                self._summarize(chunk, check.mode, rec, settings, emit)
            else:
                self._extract(chunk, check.mode, rec, settings, emit)
            ss.marker = chunk.last_seq
            ss.chunks += 1
        if check.chunks:
            ss.pending = [m for m in ss.pending if m.seq > ss.marker]

    def _summarize(self, chunk: Chunk, mode: str, rec: Recorded, s: DiscussionSettings, emit: Emit) -> None:
        st = self.state
        memory_id = f"g{st.generation}-m{chunk.first_seq}-{chunk.last_seq}"
        summary, llm, outcome = self._chunk_summary(chunk.messages, s)
        event = ChunkSummarized(
            generation=st.generation, memory_id=memory_id, first_seq=chunk.first_seq, last_seq=chunk.last_seq,
            message_ids=tuple(m.message_id for m in chunk.messages), token_count=chunk.tokens,
            first_ts_us=chunk.messages[0].ts_us, last_ts_us=chunk.messages[-1].ts_us, summary=summary,
            mode=mode, trigger=chunk.trigger, llm=llm,
            workflow=outcome.tag if outcome else None, workflow_error=outcome.error if outcome else None,
        )
        emit(NewEvent(event, rec.ts_us, f"chunk:{memory_id}", rec.seq))
        st.recent = (st.recent + [summary])[-d.MAX_SUMMARY_CHUNKS_FROM_FILE:]

    def _chunk_summary(self, messages: Sequence[Msg], s: DiscussionSettings
                       ) -> tuple[str, LlmCall, WorkflowOutcome | None]:
        """(summary, its LlmCall, the memory workflow's outcome or None) of a chunk's messages."""
        st = self.state
        outcome = None
        if s.file_memory_workflow_name and self.workflows is not None:
            everything = [_chunk(r).summary for r in self.log.chunk_memories(st.discussion, 0)
                          if _chunk(r).generation == st.generation]
            outcome = self.workflows.run(s.file_memory_workflow_name, {
                "TextChunk": transcript(messages),
                "Memory_file": "\n".join(st.recent),
                "Full_Memory_file": "\n".join(everything),
                "Chat_Summary": st.summary.text,
            }, endpoint_name=s.endpoint_name, preset=s.preset)
        if outcome is not None and outcome.text is not None and outcome.llm is not None:
            summary, llm = outcome.text, outcome.llm
        else:
            result = self.tasks.summarize_chunk(
                chat_lines(messages), max_tokens=s.max_response_size_in_tokens,
                recent_memories=st.recent, chat_summary=st.summary.text,
                # The settings' own prompts when the user wrote some; engram's template otherwise.
                system_prompt=None if s.system_prompt == DEFAULT_SYSTEM_PROMPT else s.system_prompt,
                prompt=None if s.prompt == DEFAULT_PROMPT else s.prompt,
                endpoint_name=s.endpoint_name, preset=s.preset,
            )
            summary, llm = result.value, result.llm
        return summary, llm, outcome

    def _extract(self, chunk: Chunk, mode: str, rec: Recorded, s: DiscussionSettings, emit: Emit) -> None:
        st = self.state
        base = f"g{st.generation}-v{chunk.first_seq}-{chunk.last_seq}"
        memories: list[StructuredMemory] = []
        outcome = None
        # Vector memories have their own endpoint and preset, falling back to the general ones.
        endpoint_name = s.vector_memory_endpoint_name or s.endpoint_name
        preset = s.vector_memory_preset or s.preset
        if s.vector_memory_workflow_name and self.workflows is not None:
            outcome = self.workflows.run(s.vector_memory_workflow_name, {"TextChunk": transcript(chunk.messages)},
                                         endpoint_name=endpoint_name, preset=preset)
            if outcome.text is not None:
                memories, error = parse_structured(outcome.text)
                if error:
                    outcome = WorkflowOutcome(None, outcome.tag, error, outcome.llm)
        if outcome is not None and outcome.text is not None and memories and outcome.llm is not None:
            llm = outcome.llm
        else:
            result = self.tasks.extract_memory(chat_lines(chunk.messages),
                                               max_tokens=s.vector_memory_max_response_size_in_tokens,
                                               endpoint_name=endpoint_name, preset=preset)
            memories, llm = [result.value], result.llm
        for n, mem in enumerate(memories):
            memory_id = f"{base}.{n}"
            event = VectorMemoryStored(
                generation=st.generation, memory_id=memory_id, title=mem.title, summary=mem.summary,
                entities=tuple(mem.entities), key_phrases=tuple(mem.key_phrases), first_seq=chunk.first_seq,
                last_seq=chunk.last_seq, message_ids=tuple(m.message_id for m in chunk.messages),
                token_count=chunk.tokens, first_ts_us=chunk.messages[0].ts_us, last_ts_us=chunk.messages[-1].ts_us,
                mode=mode, trigger=chunk.trigger, embedding=PENDING, embedding_model=PENDING,  # see embed_pending
                llm=llm, sentiment=mem.sentiment, topics=tuple(mem.topics),
                workflow=outcome.tag if outcome else None, workflow_error=outcome.error if outcome else None,
            )
            emit(NewEvent(event, rec.ts_us, f"vector:{memory_id}", rec.seq))


class Summarized(Protocol):
    """What a vector memory's embedding text is made of (a StructuredMemory, a VectorMemoryStored, a stored row)."""

    @property
    def title(self) -> str: ...

    @property
    def summary(self) -> str: ...

    @property
    def key_phrases(self) -> Sequence[str]: ...


def embedding_text(m: Summarized | MemoryEdited) -> str:
    """What a vector memory's embedding is computed from: its title, summary and key phrases (a user's edit of its
    text alone: its content)."""
    if isinstance(m, MemoryEdited):
        parts = [m.title or "", m.content or ""] + (["; ".join(m.key_phrases)] if m.key_phrases else [])
        return "\n".join(p for p in parts if p)
    parts = [m.title, m.summary]
    if m.key_phrases:
        parts.append("; ".join(m.key_phrases))
    return "\n".join(p for p in parts if p)


# The embedding of a vector memory that `embed_pending` has not filled in yet.
PENDING = ""


class EmbeddingJob:
    """The PENDING vector memories among `events`, being embedded in one call of `embedder`.

    An embedder with `embed_async` (the home's EmbedderActor) computes while the caller goes on;
    `events()` waits for the vectors and returns `events` with them filled in.
    """

    def __init__(self, events: Sequence[NewEvent], embedder: Embedder):
        self._events = list(events)
        self._pending = [k for k, e in enumerate(self._events)
                         if (isinstance(e.event, VectorMemoryStored)
                             or (isinstance(e.event, MemoryEdited) and e.event.kind == "vector" and e.event.content))
                         and e.event.embedding == PENDING]
        self._embedder = embedder
        self._vectors: Callable[[], np.ndarray] | None = None
        if self._pending:
            # (the pending are VectorMemoryStored events, picked above)
            texts = [embedding_text(cast(VectorMemoryStored, self._events[k].event)) for k in self._pending]
            start = getattr(embedder, "embed_async", None)
            if start is not None:
                self._vectors = start(texts)
            else:
                vectors = embedder.embed(texts)
                self._vectors = lambda: vectors

    def events(self) -> list[NewEvent]:
        if self._vectors is None:
            return self._events
        vectors, model = self._vectors(), self._embedder.name
        out = list(self._events)
        for k, vector in zip(self._pending, vectors):
            event = msgspec.structs.replace(out[k].event, embedding=encode_vector(vector), embedding_model=model)
            out[k] = msgspec.structs.replace(out[k], event=event)
        return out


def embed_pending(events: Sequence[NewEvent], embedder: Embedder) -> list[NewEvent]:
    """`events` with the embedding of every vector memory still PENDING, all computed in one call."""
    return EmbeddingJob(events, embedder).events()


def parse_structured(text: str) -> tuple[list[StructuredMemory], str | None]:
    """Structured memories from a vector-memory workflow's output: a JSON object or an array of them."""
    import json

    import msgspec

    from engram.providers.llm.jsonparse import AnswerNotJson, parse_json

    try:
        data = parse_json(text)
    except AnswerNotJson as exc:
        return [], f"the workflow's output is not JSON: {exc}"
    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return [], f"item {i} of the workflow's output is {type(item).__name__}, not an object"
        item = {k: v for k, v in item.items() if k in ("title", "summary", "entities", "key_phrases", "sentiment", "topics")}
        try:
            out.append(msgspec.convert(item, StructuredMemory))
        except msgspec.ValidationError as exc:
            return [], f"item {i} of the workflow's output: {exc} (got {json.dumps(item)[:200]})"
    if not out:
        return [], "the workflow's output holds no memory"
    return out, None

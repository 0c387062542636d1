"""Planning a regeneration whose LLM calls go through the Message Batches API (pure: no I/O, no clock).

The live Summarizer decides a new generation call by call: a chunk summary's prompt holds the chunk
memories written just before it (`[Memory_file]`), and each rolling-summary merge starts from the
summary the previous merge wrote. So the prompts of one discussion depend on the answers to its earlier
prompts, and cannot all be known up front. A batched regeneration therefore goes in *rounds*: in each
round, every discussion being regenerated contributes the one call it needs next, and the round's calls
of the whole home go out as one Message Batch. A discussion with n chunk memories and m merges of its
rolling summary needs n + m rounds (vector memories depend on nothing: they all go in the first round);
the home needs as many rounds as its longest discussion, not one per call.

Each round is planned by running the real `DiscussionSummarizer` over the discussion's history, exactly
as the live Summarizer would run it on `GenerationStarted`, with `PlannedTasks` as its LLM: a call whose
answer is known (from earlier rounds) is answered; a call that has none is answered with a mark, and it
becomes a request of the next batch unless its own prompt holds a mark (it depends on a pending answer).
So the first round holds every discussion's first chunk memory and all its vector memories, and each
following round the next chunk memory or merge. When every call of a discussion is answered, the same run yields
the events the live Summarizer would have written for those answers — same ids, same content — and
they are appended after `GenerationStarted(batch=...)` in one write. So the result equals a live
regeneration fed the same model outputs, by construction rather than by a second implementation.

Custom ids are derived from the discussion, the generation, the call's position and its input, so an
answer only ever serves the exact prompt it was asked for (a resumed job reuses answers, never mixes
them up).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import msgspec

from engram.config.discussion import DiscussionSettings
from engram.events.control import GenerationStarted
from engram.events.discussion import ChunkSummarized, SummaryUpdateRequested
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import MessageAppended
from engram.events.provenance import LlmCall
from engram.memory.discussion.chunking import Msg
from engram.memory.discussion.regenerate import Generation
from engram.memory.discussion.state import DiscussionState
from engram.memory.discussion.summarizer import DiscussionSummarizer, to_msg
from engram.providers.llm import inputs as i
from engram.providers.llm.hashing import digest
from engram.providers.llm.tasks import MemoryTasks
from engram.providers.llm.types import Result, StructuredMemory

# What the Message Batches API cannot run: a memory workflow is a graph of nodes run one after another.
WORKFLOW_SETTINGS = ("file_memory_workflow_name", "vector_memory_workflow_name")


# Stands for an answer not known yet, so that the run goes on to the calls that do not depend on it (a vector
# memory's extraction does not need the chunk memory before it; the next chunk memory does: its prompt holds it).
PENDING_MARK = "\u27e6engram: answer pending in a Message Batch\u27e7"


class PlannedTasks(MemoryTasks):
    """The memory tasks of one planned regeneration: known answers by key. An unknown call whose input holds no
    pending answer is needed (it goes into the next batch); any unknown call is answered with `PENDING_MARK`."""

    provider = "batch-plan"

    def __init__(self, prefix: str, answers: Mapping[str, Result[Any]]) -> None:
        self.prefix, self.answers, self.calls = prefix, answers, 0
        self.needed: list[tuple[str, i.TaskInput]] = []
        self.pending = 0

    def describe(self) -> str:
        return "answers of Message Batches"

    def run(self, task_input: i.TaskInput) -> Result[Any]:
        encoded = i.encode_input(task_input)
        key = f"{self.prefix}-{self.calls}-{digest(encoded)}"
        self.calls += 1
        answer = self.answers.get(key)
        if answer is not None:
            return answer
        self.pending += 1
        if PENDING_MARK not in encoded:
            self.needed.append((key, task_input))
        llm = LlmCall(provider=self.provider, model="", task=task_input.task, prompt_hash="")
        if task_input.task == "extract_memory":
            return Result(value=StructuredMemory(title=PENDING_MARK, summary=PENDING_MARK), llm=llm)
        return Result(value=PENDING_MARK, llm=llm)


def discussion_prefix(agent: str, discussion: str, generation: int) -> str:
    return f"r{digest(agent, discussion)}-g{generation}"


class _PlanLog:
    """The log the simulated Summarizer reads: the history's messages, and what it has emitted so far."""

    def __init__(self, messages: list[Msg], first_seq: int):
        self._messages = messages
        self._emitted: list[Recorded] = []
        self._next = first_seq

    def record(self, agent: str, stream: str, event: NewEvent) -> None:
        self._emitted.append(Recorded(seq=self._next, stream=stream, stream_version=0, agent=agent,
                                      ts_us=event.ts_us, event=event.event, causation=event.causation,
                                      event_id=event.event_id))
        self._next += 1

    def messages(self, discussion: str, after_seq: int, to_seq: int) -> list[Msg]:
        return [m for m in self._messages if after_seq < m.seq <= to_seq]

    def chunk_memories(self, discussion: str, after_seq: int, edits_through: int | None = None) -> list[Recorded]:
        return [r for r in self._emitted if isinstance(r.event, ChunkSummarized) and r.seq > after_seq]

    def history(self, discussion: str, to_seq: int | None = None) -> list[Recorded]:  # not asked by the checks
        return []

    def vector_memories(self, discussion: str) -> list[Recorded]:  # a regeneration sees no message change
        return []

    def memory_edits(self, discussion: str) -> list[Recorded]:
        return []


@dataclass(frozen=True)
class Target:
    """One discussion to regenerate: its history up to `through_seq` (planned once, kept by the job)."""

    agent: str
    discussion: str
    through_seq: int
    generation: int  # the new generation's number


@dataclass
class Outcome:
    """A planning run of one discussion: the next call to batch, or (every call answered) the write."""

    target: Target
    needed: list[tuple[str, i.TaskInput]] = field(default_factory=list)  # the calls the next batch must answer
    write: Write | None = None
    calls: int = 0


def workflow_problem(settings: DiscussionSettings) -> str | None:
    """Why a discussion cannot be regenerated through batches (its settings name a memory workflow)."""
    named = [getattr(settings, f) for f in WORKFLOW_SETTINGS if getattr(settings, f)]
    if named:
        return (f"its settings name the memory workflow {named[0]!r}, whose nodes run one after another "
                f"(regenerate it without --batch)")
    return None


def plan(target: Target, history: Sequence[Recorded], settings: DiscussionSettings, answers: Mapping[str, Result[Any]],
         *, ts_us: int, batch: str, reason: str = "engram regenerate --batch") -> Outcome:
    """Run the Summarizer over `history` (the discussion's HISTORY_TYPES events up to `target.through_seq`) as
    it would run on a new generation, answering from `answers`.

    Returns the calls that can be asked now (those whose prompts hold no answer still pending), or — when there is none — the one write that starts the
    generation and holds every memory event the live Summarizer would have written: `GenerationStarted` (with
    `batch`), the rolling-summary request if the discussion had a summary, then the memories and summaries.
    """
    history = [r for r in history if r.seq <= target.through_seq]
    gen = Generation(target.agent, target.discussion, history, reason=reason, ts_us=ts_us, batch=batch)
    if gen.number != target.generation:
        raise ValueError(f"discussion {target.discussion!r} is at generation {gen.previous} now; the plan was made "
                         f"for generation {target.generation}")
    messages = [to_msg(r) for r in history if isinstance(r.event, MessageAppended)]
    log = _PlanLog(messages, target.through_seq + 1)
    start_events = list(gen.write.events)
    # The records the live Summarizer would receive, at the positions the write would give them.
    # (`GenerationStarted` as the live Summarizer sees it: without `batch`, which makes it adopt the write.)
    start = []
    for ev in start_events:
        if isinstance(ev.event, GenerationStarted):
            ev = msgspec.structs.replace(ev, event=msgspec.structs.replace(ev.event, batch=None))
        log.record(target.agent, target.discussion, ev)
        start.append(log._emitted.pop())
    state = DiscussionState(target.agent, target.discussion, generation=gen.previous, message_count=len(messages),
                            decided_through=target.through_seq)
    tasks = PlannedTasks(discussion_prefix(target.agent, target.discussion, target.generation), answers)
    summarizer = DiscussionSummarizer(state, tasks=tasks, log=log, workflows=None)
    emitted: list[NewEvent] = []

    def emit(event: NewEvent) -> None:
        # The causation of the live events is the position of their cause in the log, which a write cannot
        # name before it is appended: batch-written memories have none (GenerationStarted.batch says so).
        event = msgspec.structs.replace(event, causation=None)
        emitted.append(event)
        log.record(target.agent, target.discussion, event)

    for rec in start:
        if isinstance(rec.event, GenerationStarted):
            summarizer.on_generation(rec, settings, emit)
        elif isinstance(rec.event, SummaryUpdateRequested):
            summarizer.on_summary_request(rec, settings, emit, lambda: None)
    outcome = Outcome(target, calls=tasks.calls)
    if tasks.pending:
        outcome.needed = tasks.needed
        return outcome
    outcome.write = Write(target.discussion, target.agent, tuple(start_events) + tuple(emitted))
    return outcome

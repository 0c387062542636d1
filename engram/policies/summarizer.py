"""The Summarizer policy: hosts the per-discussion Summarizers placed on this pool member.

Registered in `policies.registry.GROUPS["summarizer"]`: each shard has a pool of PolicyActors
for it, and `engram.kernel.placement.owner(discussion, members)` places every discussion on one member, so
a discussion's memory work is serial (one logical actor, one mailbox) while discussions spread
over the pool. Every member folds the settings (`SettingsChanged`); only the owner of a
discussion handles its events.

Events are appended as work goes (`PolicyContext.append`): after each rolling-summary batch
("save after each"), before the log is read back, when a batch of work took long, and at the
end of each handled batch. Their ids are deterministic, so a batch handled again after a
restart appends nothing twice. Just before an append, the vector memories in it get their
embeddings from the `"embedder"` service (`engram.providers.services`: the home's EmbedderActor under Ray,
a local cached embedder without it) in one batch.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from engram.config.discussion import DiscussionSettings
from engram.events.control import AgentForgotten, DiscussionForgotten, GenerationStarted, SettingsChanged
from engram.events.discussion import RollingSummaryUpdated, SummaryUpdateRequested
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import MESSAGE_TYPES, MessageAppended, MessageEdited, MessageRemoved, conversation
from engram.kernel.placement import owner
from engram.events.memory_edits import MemoryEdited
from engram.memory.discussion.chunking import Msg
from engram.memory.discussion.files import with_edits
from engram.memory.discussion.memory_workflows import MemoryWorkflowLibrary
from engram.memory.discussion.state import DiscussionState, HISTORY_TYPES, state_from_log
from engram.memory.discussion.summarizer import DiscussionSummarizer, EmbeddingJob, to_msg
from engram.memory.settings import SettingsView
from engram.policies.base import Policy, PolicyContext

# Append what was decided at least this often while a long batch is being worked through, so
# that a slow LLM's finished memories are durable (and visible) before the whole batch is done.
FLUSH_INTERVAL_S = 0.5
# Discussions a member works on at once when the LLM is remote (their calls wait on the network).
PARALLEL_DISCUSSIONS = 4
# Events handled per call when discussions are worked on one at a time: the host moves this member's
# position past each part (a long import's progress shows it under way). With a remote LLM a call takes
# the host's whole batch, whose discussions are worked on side by side.
SERIAL_HANDLE_BATCH = 256


class _Log:
    """The Summarizer's reads of the log; pending appends are flushed first."""

    def __init__(self, policy: "Summarizer", agent: str | None = None):
        self.policy = policy
        self.agent = agent  # whose discussions these are: a discussion id is unique within its agent only

    def of(self, agent: str) -> "_Log":
        return _Log(self.policy, agent)

    def _read(self, **kw) -> list[Recorded]:
        self.policy.flush()
        read = self.policy.ctx.read
        if read is None:
            raise RuntimeError("the Summarizer needs a host that can read the log (PolicyContext.read)")
        if self.agent is not None:
            kw["agent"] = self.agent
        return read(0 if "after" not in kw else kw.pop("after"), limit=None, **kw)

    def messages(self, discussion: str, after_seq: int, to_seq: int) -> list[Msg]:
        """The messages after `after_seq` as the conversation holds them at `to_seq` (edits applied, removed ones
        left out: `engram.events.messages.conversation`)."""
        return [to_msg(r) for r in conversation(
            self._read(after=after_seq, to_seq=to_seq, stream=discussion, types=list(MESSAGE_TYPES)))]

    def chunk_memories(self, discussion: str, after_seq: int, edits_through: int | None = None) -> list[Recorded]:
        recs = self._read(after=after_seq, stream=discussion, types=["ChunkSummarized", "MemoryEdited"])
        return with_edits([r for r in recs if edits_through is None or r.type != "MemoryEdited"
                           or r.seq <= edits_through])

    def vector_memories(self, discussion: str) -> list[Recorded]:
        return self._read(after=0, stream=discussion, types=["VectorMemoryStored"])

    def memory_edits(self, discussion: str) -> list[Recorded]:
        return self._read(after=0, stream=discussion, types=["MemoryEdited"])

    def history(self, discussion: str, to_seq: int | None = None) -> list[Recorded]:
        return self._read(after=0, to_seq=to_seq, stream=discussion, types=list(HISTORY_TYPES))


class Summarizer(Policy):
    name = "summarizer"
    interests = frozenset(
        {
            "MessageAppended",
            "MessageEdited",
            "MessageRemoved",
            "SettingsChanged",
            "GenerationStarted",
            "SummaryUpdateRequested",
            "RollingSummaryUpdated",
            "MemoryEdited",
            "DiscussionForgotten",
            "AgentForgotten",
        }
    )

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.settings = SettingsView()
        self.discussions: dict[tuple[str, str], DiscussionState] = {}  # (agent, discussion id) -> state
        self._log = _Log(self)
        self._tasks = None
        self._embedder = None
        self._workflows: MemoryWorkflowLibrary | None = None
        self._queue: list[tuple[str, str, NewEvent]] = []  # (stream, agent, event) not yet appended
        # Events whose vector memories are being embedded while work goes on (appended at the next flush).
        self._inflight: tuple[list[tuple[str, str, NewEvent]], EmbeddingJob] | None = None
        self._last_flush = time.monotonic()
        self._lock = threading.RLock()  # the queue and the appends, shared by the mailbox threads
        self._parallel: int | None = None

    # ------------------------------------------------------------------ services (lazy)

    @property
    def tasks(self):
        if self._tasks is None:
            self._tasks = self.ctx.tasks
        return self._tasks

    @property
    def embedder(self):
        """The embedder service; a host that gives none (a bare PolicyContext) gets the configured
        model in this process, uncached."""
        if self._embedder is None:
            self._embedder = self.ctx.services.get("embedder")
            if self._embedder is None:
                from engram.providers.embeddings.factory import make_embedder, single_threaded

                config = self.ctx.services.get("config")
                self._embedder = make_embedder(single_threaded(config.embedder if config is not None else None))
        return self._embedder

    @property
    def workflows(self) -> MemoryWorkflowLibrary:
        if self._workflows is None:
            self._workflows = MemoryWorkflowLibrary(self.ctx.home.root, self.tasks)
        return self._workflows

    # ------------------------------------------------------------------ handling

    def mine(self, discussion: str) -> bool:
        return owner(discussion, self.ctx.members) == self.ctx.member

    def handle(self, batch: list[Recorded]) -> list[Write]:
        # First, in log order: settings, forgetting, and each discussion's mailbox (every event
        # with the settings in force at its position).
        mailboxes: dict[tuple[str, str], tuple[DiscussionSummarizer, list[tuple[Recorded, DiscussionSettings]]]] = {}
        for rec in batch:
            ev = rec.event
            if isinstance(ev, SettingsChanged):
                self.settings.apply(rec)
                continue
            if isinstance(ev, (AgentForgotten, DiscussionForgotten)):
                gone = ([(rec.agent, ev.discussion_id)] if isinstance(ev, DiscussionForgotten)
                        else [d for d, st in self.discussions.items() if st.agent == ev.agent_id])
                for d in gone:
                    self.discussions.pop(d, None)
                    mailboxes.pop(d, None)
                continue
            if rec.stream.startswith("agent:") or not self.mine(rec.stream):
                continue
            key = (rec.agent, rec.stream)
            box = mailboxes.get(key)
            if box is None:
                actor = self._actor(rec)
                if actor is None:
                    continue
                box = mailboxes[key] = (actor, [])
            box[1].append((rec, self.settings.discussion_settings(rec.agent, rec.stream)))
        # Then the mailboxes: each one in order, by one thread at a time (serial per discussion);
        # different discussions in parallel when the LLM is remote (I/O-bound).
        boxes = list(mailboxes.values())
        if self.parallel > 1 and len(boxes) > 1:
            with ThreadPoolExecutor(min(self.parallel, len(boxes)), thread_name_prefix="summarizer") as pool:
                for _ in pool.map(lambda box: self._work(*box), boxes):
                    pass
        else:
            for box in boxes:
                self._work(*box)
        self.flush()
        return []

    @property
    def handle_batch(self) -> int | None:
        """SERIAL_HANDLE_BATCH when discussions are worked on one at a time, else the host's whole batch (unless set)."""
        if self._handle_batch is not None:
            return self._handle_batch
        return SERIAL_HANDLE_BATCH if self.parallel == 1 else None

    @handle_batch.setter
    def handle_batch(self, events: int | None) -> None:
        self._handle_batch = events

    @property
    def parallel(self) -> int:
        """Discussions worked on at once: one with the offline heuristic (CPU-bound in Python,
        threads would only take turns), PARALLEL_DISCUSSIONS with a remote LLM."""
        if self._parallel is None:
            self._parallel = 1 if getattr(self.tasks, "provider", "offline") == "offline" else PARALLEL_DISCUSSIONS
        return self._parallel

    @parallel.setter
    def parallel(self, value: int) -> None:
        self._parallel = value

    def _work(self, actor: DiscussionSummarizer, mailbox: list[tuple[Recorded, DiscussionSettings]]) -> None:
        for rec, settings in mailbox:
            ev = rec.event
            emit = self._emitter(rec.stream, rec.agent)
            if isinstance(ev, MessageAppended):
                actor.on_message(rec, settings, emit)
            elif isinstance(ev, (MessageEdited, MessageRemoved)):
                actor.on_message_change(rec, settings, emit)
            elif isinstance(ev, GenerationStarted):
                actor.on_generation(rec, settings, emit)
            elif isinstance(ev, SummaryUpdateRequested):
                actor.on_summary_request(rec, settings, emit, self.flush)
            elif isinstance(ev, RollingSummaryUpdated):
                actor.adopt_summary(rec)
            elif isinstance(ev, MemoryEdited):
                actor.on_memory_edit(rec, settings, emit, self.flush)
            if time.monotonic() - self._last_flush > FLUSH_INTERVAL_S:
                self.flush(wait=False)

    def _actor(self, rec: Recorded) -> DiscussionSummarizer | None:
        key = (rec.agent, rec.stream)
        log = self._log.of(rec.agent)
        state = self.discussions.get(key)
        if state is None:
            if isinstance(rec.event, RollingSummaryUpdated):
                return None  # our own output from before a restart: nothing to adopt it into
            if self.ctx.read is not None:
                # The log may hold history of this discussion that this member never handled, or
                # decisions it made before a restart that lost its snapshot: resume from the log.
                state = state_from_log(rec.agent, rec.stream, log.history(rec.stream), rec.seq)
            else:
                state = DiscussionState(rec.agent, rec.stream)
            self.discussions[key] = state
        return DiscussionSummarizer(state, tasks=self.tasks, log=log, workflows=self.workflows)

    def _emitter(self, stream: str, agent: str):
        def emit(event: NewEvent) -> None:
            with self._lock:
                self._queue.append((stream, agent, event))

        return emit

    def flush(self, *, wait: bool = True) -> None:
        """Append every decided event (in decision order per discussion, one all-or-nothing call per
        flush), the vector memories among them embedded first, in one embedder call.

        `wait=False` (the periodic flush during long work) appends what the previous such flush
        left embedding, and leaves this flush's events embedding while the Summarizer works on:
        the embedder actor computes beside it. Every other flush appends everything now. Events
        are dropped from the queue only once appended: a failed embedding or append leaves them
        for the next flush (their ids make a repeat harmless)."""
        with self._lock:
            self._last_flush = time.monotonic()
            if self._inflight is not None:
                queued, job = self._inflight
                self._inflight = None
                self._append(queued, job)
            if not self._queue:
                return
            if self.ctx.append is None:
                raise RuntimeError("the Summarizer needs a host that can append (PolicyContext.append)")
            queued = list({(agent, stream, e.event_id or n): (stream, agent, e)
                           for n, (stream, agent, e) in enumerate(self._queue)}.values())
            job = EmbeddingJob([e for _, _, e in queued], self.embedder)
            self._queue = []
            if wait:
                self._append(queued, job)
            else:
                self._inflight = (queued, job)

    def _append(self, queued: list[tuple[str, str, NewEvent]], job: EmbeddingJob) -> None:
        try:
            events = job.events()
            writes: list[Write] = []
            for (stream, agent, _), event in zip(queued, events):
                if writes and writes[-1].stream == stream and writes[-1].agent == agent:
                    writes[-1] = Write(stream, agent, writes[-1].events + (event,))
                else:
                    writes.append(Write(stream, agent, (event,)))
            assert self.ctx.append is not None  # `flush` refused a host that cannot append
            self.ctx.append(writes)
        except BaseException:
            self._queue = queued + self._queue  # kept for the next flush
            raise

    # ------------------------------------------------------------------ snapshots

    def state(self) -> Any:
        return {"settings": self.settings.state(), "discussions": self.discussions}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            # Keyed by (agent, discussion id); a snapshot from before discussion ids per agent keyed by the id alone.
            self.discussions = {(st.agent, st.discussion): st for st in state["discussions"].values()}

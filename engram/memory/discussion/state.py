"""A discussion's Summarizer state, and resuming it from the log.

The state is small: the generation, per store (chunk memories, vector memories) whether it
exists, how far chunks reach and the messages still pending, and the rolling summary written
so far. Everything in it can be derived from the discussion's events, which is how a host
that has no snapshot resumes without deciding anything again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from engram.config import defaults as d
from engram.events.control import GenerationStarted
from engram.events.discussion import (
    ChunkSummarized,
    MemoryFileCreated,
    RollingSummaryUpdated,
    STORE_MEMORIES,
    VectorMemoryStored,
)
from engram.events.envelope import Recorded
from engram.events.messages import MessageAppended
from engram.memory.discussion.chunking import Msg
from engram.memory.discussion.files import chunk_memory_id


@dataclass
class StoreState:
    created: bool = False
    marker: int = 0  # seq of the last message already in a chunk of this generation
    pending: list[Msg] | None = field(default_factory=list)  # messages after `marker`; None: reload from the log
    chunks: int = 0


@dataclass
class SummaryState:
    text: str = ""
    absorbed_through: str = ""  # memory_id of the last merged chunk memory
    absorbed_through_seq: int = 0  # its last source message
    cursor: int = 0  # seq of the last ChunkSummarized event merged (where the next read starts)
    absorbed: int = 0


@dataclass
class DiscussionState:
    agent: str
    discussion: str
    generation: int = 0
    message_count: int = 0
    memories: StoreState = field(default_factory=StoreState)
    vectors: StoreState = field(default_factory=StoreState)
    summary: SummaryState = field(default_factory=SummaryState)
    recent: list[str] = field(default_factory=list)  # the latest chunk memories (context for the next one)
    # Events up to this seq were already decided on, as the log shows: they are not decided again.
    decided_through: int = 0


# What the Summarizer itself appends (each with the seq of its cause as `causation`).
OWN_TYPES = ("MemoryFileCreated", "ChunkSummarized", "VectorMemoryStored", "RollingSummaryUpdated")
HISTORY_TYPES = ("MessageAppended", "GenerationStarted", *OWN_TYPES)


def state_from_log(agent: str, discussion: str, history: Sequence[Recorded], first_seq: int) -> DiscussionState:
    """The state to resume `discussion` with, when the first event this host sees of it is `first_seq`.

    `history`: the discussion's events in the log now (HISTORY_TYPES, in seq order). Whatever the
    log shows was decided already (the Summarizer's own events, up to their latest cause) is
    adopted, not decided again: no LLM call is repeated after a restart without a snapshot, a
    pool resize, or a batch handled a second time.
    """
    decided = max(((r.causation or 0) for r in history if r.type in OWN_TYPES), default=0)
    through = max(decided, first_seq - 1)
    known = [r for r in history if ((r.causation or 0) if r.type in OWN_TYPES else r.seq) <= through]
    if not known:
        return DiscussionState(agent, discussion)
    state = recover_state(agent, discussion, known)
    state.decided_through = decided
    return state


def recover_state(agent: str, discussion: str, history: Sequence[Recorded]) -> DiscussionState:
    """The state a Summarizer would hold after `history` (the discussion's events, in order),
    read from what was recorded: no decision is made again and no LLM is called.

    Used when a discussion reaches a pool member that has no state for it (a restart without
    snapshot, or a pool resize that moved the discussion).
    """
    st = DiscussionState(agent, discussion)
    chunk_seqs: dict[str, int] = {}
    for rec in history:
        ev = rec.event
        if isinstance(ev, MessageAppended):
            st.message_count += 1
        elif isinstance(ev, GenerationStarted) and ev.generation > st.generation:
            st.generation = ev.generation
            st.memories, st.vectors, st.summary, st.recent = StoreState(), StoreState(), SummaryState(), []
        elif getattr(ev, "generation", st.generation) != st.generation:
            continue
        elif isinstance(ev, MemoryFileCreated):
            (st.memories if ev.store == STORE_MEMORIES else st.vectors).created = True
        elif isinstance(ev, ChunkSummarized):
            st.memories.marker = max(st.memories.marker, ev.last_seq)
            st.memories.chunks += 1
            chunk_seqs[chunk_memory_id(ev)] = rec.seq
            st.recent = (st.recent + [ev.summary])[-d.MAX_SUMMARY_CHUNKS_FROM_FILE:]
        elif isinstance(ev, VectorMemoryStored):
            if ev.last_seq > st.vectors.marker:
                st.vectors.chunks += 1
            st.vectors.marker = max(st.vectors.marker, ev.last_seq)
        elif isinstance(ev, RollingSummaryUpdated):
            st.summary = SummaryState(ev.summary, ev.absorbed_through, ev.absorbed_through_seq,
                                      chunk_seqs.get(ev.absorbed_through, 0), ev.memories_absorbed)
    st.memories.pending = None  # reloaded from the log at the next check
    st.vectors.pending = None
    return st

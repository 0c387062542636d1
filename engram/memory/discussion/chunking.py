"""When a chunk memory is due, and which messages it holds (WilmerAI's memory generation triggering).

A memory check runs after every message of a discussion (and when a regeneration starts). It
looks at the *pending* messages: those after the last message already in a chunk of this
generation, in log order. "New" is a matter of event positions, never of re-hashing text.

- The most recent `lookback` pending messages are never considered (`lookbackStartTurn`).
- Standard mode (the store exists): a chunk closes as soon as its messages reach
  `chunkEstimatedTokenSize` tokens or `maxMessagesBetweenChunks` messages, whichever first.
- Consolidation mode (the store does not exist: a new conversation before its first check, or
  a regeneration): only the token threshold closes a chunk.
- The store is created at the first check that sees at least `FIRST_MEMORY_CHECK_MESSAGES`
  messages (WilmerAI: "around message 3"); that check itself still runs in consolidation mode.

Chunks are cut greedily from the oldest pending message, so a chunk never splits a message,
messages stay in order, and what is left over simply waits for the next check: nothing is
dropped and nothing is summarised twice. Because the cut only depends on the message sequence,
checking after each message or once after a batch of messages gives the same chunks in
standard mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engram.config import defaults as d
from engram.config.discussion import DiscussionSettings
from engram.events.discussion import MODE_CONSOLIDATION, MODE_STANDARD

TRIGGER_TOKENS = "tokens"
TRIGGER_MESSAGES = "messages"
TRIGGER_BOTH = "both"


@dataclass(frozen=True, slots=True)
class Msg:
    """One message as the Summarizer keeps it."""

    seq: int
    message_id: str
    role: str
    content: str
    tokens: int
    ts_us: int
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Thresholds:
    tokens: int  # chunkEstimatedTokenSize / vectorMemoryChunkEstimatedTokenSize
    messages: int  # maxMessagesBetweenChunks / vectorMemoryMaxMessagesBetweenChunks
    lookback: int  # lookbackStartTurn / vectorMemoryLookBackTurns

    @classmethod
    def file_memories(cls, s: DiscussionSettings) -> "Thresholds":
        return cls(s.chunk_estimated_token_size, s.max_messages_between_chunks, s.lookback_start_turn)

    @classmethod
    def vector_memories(cls, s: DiscussionSettings) -> "Thresholds":
        return cls(
            s.vector_memory_chunk_estimated_token_size,
            s.vector_memory_max_messages_between_chunks,
            s.vector_memory_look_back_turns,
        )


@dataclass(frozen=True, slots=True)
class Chunk:
    messages: tuple[Msg, ...]
    trigger: str

    @property
    def first_seq(self) -> int:
        return self.messages[0].seq

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.messages)


@dataclass(frozen=True, slots=True)
class Check:
    """The outcome of one memory check."""

    ran: bool  # False: fewer than FIRST_MEMORY_CHECK_MESSAGES messages and no store yet
    mode: str | None
    create_store: bool
    chunks: tuple[Chunk, ...]


SKIPPED = Check(ran=False, mode=None, create_store=False, chunks=())


def eligible(pending: Sequence[Msg], lookback: int) -> Sequence[Msg]:
    """The pending messages a check may use: all but the most recent `lookback`."""
    keep = len(pending) - lookback
    return pending[:keep] if keep > 0 else ()


def plan_chunks(pending: Sequence[Msg], th: Thresholds, *, standard: bool) -> tuple[Chunk, ...]:
    """The chunks due now, oldest first; messages after the last one wait for later checks."""
    chunks: list[Chunk] = []
    current: list[Msg] = []
    tokens = 0
    for msg in eligible(pending, th.lookback):
        current.append(msg)
        tokens += msg.tokens
        by_tokens = tokens >= th.tokens
        by_messages = standard and len(current) >= th.messages
        if by_tokens or by_messages:
            trigger = TRIGGER_BOTH if by_tokens and by_messages else TRIGGER_TOKENS if by_tokens else TRIGGER_MESSAGES
            chunks.append(Chunk(tuple(current), trigger))
            current, tokens = [], 0
    return tuple(chunks)


def memory_check(*, store_exists: bool, message_count: int, pending: Sequence[Msg], th: Thresholds) -> Check:
    """One memory check of one store (chunk memories or vector memories).

    `message_count`: messages in the discussion so far; `pending`: messages after the last chunk.
    """
    if not store_exists and message_count < d.FIRST_MEMORY_CHECK_MESSAGES:
        return SKIPPED
    mode = MODE_STANDARD if store_exists else MODE_CONSOLIDATION
    chunks = plan_chunks(pending, th, standard=store_exists)
    return Check(ran=True, mode=mode, create_store=not store_exists, chunks=chunks)

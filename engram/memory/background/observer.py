"""When the Observer observes, and when its notes join the observation log (async buffering).

Per observation log, messages wait as *pending* (unobserved) until one of two things happens:

- **buffering** (`bufferTokens` > 0): once the pending messages hold at least `bufferTokens`
  tokens, they are observed as one increment in the background and recorded as *buffered* notes;
- **the threshold**: once the tokens not yet in the observation log (buffered + pending) exceed
  `activationTokens` (30,000), the buffered notes are activated: one small event, no LLM call,
  nothing observed again. The pending tail (fewer than `bufferTokens`) stays pending for the next
  increment. Without buffering, all pending messages are observed at the threshold instead.

Every message is observed exactly once. Decisions depend only on the messages' token estimates
(never on how the log was batched), so a re-run decides the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engram.memory.background.observation_log import LogKey  # noqa: F401 (re-exported)
from engram.config.agent import ObserverSettings
from engram.providers.llm.types import ChatLine


@dataclass(frozen=True)
class Pending:
    stream: str
    line: ChatLine
    tokens: int


@dataclass(frozen=True)
class Increment:
    """Buffered observations recorded for `stream`, messages `first_seq..last_seq`."""

    stream: str
    first_seq: int
    last_seq: int
    tokens: int


@dataclass
class Buffer:
    """One observation log's unobserved messages and buffered increments."""

    key: LogKey
    pending: list[Pending] = field(default_factory=list)
    increments: list[Increment] = field(default_factory=list)  # buffered, not yet activated

    @property
    def pending_tokens(self) -> int:
        return sum(p.tokens for p in self.pending)

    @property
    def buffered_tokens(self) -> int:
        return sum(i.tokens for i in self.increments)

    @property
    def unobserved_tokens(self) -> int:
        """Tokens not yet in the observation log: the threshold's measure."""
        return self.buffered_tokens + self.pending_tokens


@dataclass(frozen=True)
class Observe:
    """Observe `lines` (one stream's pending messages) and record the notes (buffered or not)."""

    key: LogKey
    stream: str
    lines: tuple[ChatLine, ...]
    tokens: int
    buffered: bool

    @property
    def first_seq(self) -> int:
        return self.lines[0].seq

    @property
    def last_seq(self) -> int:
        return self.lines[-1].seq


@dataclass(frozen=True)
class Activate:
    """The threshold was crossed: the buffered increments up to `through_seq` join the log."""

    key: LogKey
    through_seq: int
    increments: tuple[Increment, ...]
    unobserved_tokens: int
    threshold: int


Step = Observe | Activate


def _observe_pending(buf: Buffer, buffered: bool) -> list[Observe]:
    """One Observe per stream among the pending messages (agent scope spans discussions), in seq order."""
    by_stream: dict[str, list[Pending]] = {}
    for p in buf.pending:
        by_stream.setdefault(p.stream, []).append(p)
    steps = [
        Observe(buf.key, stream, tuple(p.line for p in items), sum(p.tokens for p in items), buffered)
        for stream, items in by_stream.items()
    ]
    buf.pending = []
    if buffered:
        buf.increments += [Increment(s.stream, s.first_seq, s.last_seq, s.tokens) for s in steps]
    return sorted(steps, key=lambda s: s.first_seq)


def add_message(buf: Buffer, stream: str, line: ChatLine, tokens: int, settings: ObserverSettings) -> list[Step]:
    """Take one message into `buf`; returns what to do now, in order."""
    buf.pending.append(Pending(stream, line, tokens))
    return check(buf, settings)


def check(buf: Buffer, settings: ObserverSettings) -> list[Step]:
    """The steps `buf` calls for under `settings` (also after a settings change)."""
    steps: list[Step] = []
    buffering = 0 < settings.buffer_tokens
    if buffering and buf.pending_tokens >= settings.buffer_tokens:
        steps += _observe_pending(buf, buffered=True)
    if buf.unobserved_tokens > settings.activation_tokens:
        unobserved = buf.unobserved_tokens
        if buf.increments:
            # The notes are already there: activating them is one small event. The pending tail
            # (below `bufferTokens`) waits for the next increment.
            increments = tuple(buf.increments)
            buf.increments = []
            steps.append(Activate(buf.key, max(i.last_seq for i in increments), increments, unobserved,
                                  settings.activation_tokens))
        elif buf.pending:
            # Nothing buffered (buffering off, or `bufferTokens` above the threshold): observe now.
            steps += _observe_pending(buf, buffered=False)
    return steps


def forget_stream(buf: Buffer, stream: str) -> None:
    buf.pending = [p for p in buf.pending if p.stream != stream]
    buf.increments = [i for i in buf.increments if i.stream != stream]

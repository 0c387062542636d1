"""One discussion's context as compaction sees it: the chain of summary nodes, then the raw turns.

`DiscussionContext` is a fold: messages add raw turns, `ContextCompacted` events replace raw turns
and nodes by a node. The policy, the projection, the benchmark and the tests share it, so that the
chain a compaction was decided on is the chain replay rebuilds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from engram.events.background import ContextCompacted


@dataclass(frozen=True)
class Turn:
    """A raw (not yet compacted) message: its seq, token estimate and turn number (1-based)."""

    seq: int
    tokens: int
    turn: int


@dataclass(frozen=True)
class ChainNode:
    node_id: str
    strategy: str
    level: int
    first_seq: int
    last_seq: int
    first_turn: int
    last_turn: int
    summary: str
    tokens: int
    covered_tokens: int
    children: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    ts_us: int = 0

    @property
    def label(self) -> str:
        """`[L1: turns 1-120]`, as the guide draws the chain."""
        return f"[L{self.level}: turns {self.first_turn}-{self.last_turn}]"

    @classmethod
    def of(cls, ev: ContextCompacted, ts_us: int = 0) -> "ChainNode":
        return cls(
            node_id=ev.node_id, strategy=ev.strategy, level=ev.level, first_seq=ev.first_seq, last_seq=ev.last_seq,
            first_turn=ev.first_turn, last_turn=ev.last_turn, summary=ev.summary, tokens=ev.output_tokens,
            covered_tokens=ev.covered_tokens, children=tuple(ev.children), entities=tuple(ev.preserved_entities),
            ts_us=ts_us,
        )


@dataclass
class DiscussionContext:
    agent: str
    discussion: str
    turns: int = 0  # messages seen in the discussion
    chain: list[ChainNode] = field(default_factory=list)  # top nodes, oldest first
    raw: list[Turn] = field(default_factory=list)  # turns after the chain, oldest first
    known: set[str] = field(default_factory=set)  # every node id applied (merged ones too)
    raw_total: int = 0  # tokens of `raw`, kept as turns come and go (checked after every message)

    # ------------------------------------------------------------------ folding

    def add_message(self, seq: int, tokens: int) -> Turn:
        self.turns += 1
        turn = Turn(seq=seq, tokens=tokens, turn=self.turns)
        if self.raw and seq <= self.raw[-1].seq:
            raise ValueError(f"message seq {seq} is not after {self.raw[-1].seq}")
        self.raw.append(turn)
        self.raw_total += tokens
        return turn

    def apply(self, ev: ContextCompacted, ts_us: int = 0) -> bool:
        """Fold one compaction (idempotent: a node seen before changes nothing). True if it was new."""
        if ev.node_id in self.known:
            return False
        node = ChainNode.of(ev, ts_us)
        gone = set(node.children)
        self.chain = [n for n in self.chain if n.node_id not in gone]
        starts = [n.first_seq for n in self.chain]
        self.chain.insert(bisect.bisect_left(starts, node.first_seq), node)
        if ev.messages:
            self.raw = [t for t in self.raw if not (node.first_seq <= t.seq <= node.last_seq)]
            self.raw_total = sum(t.tokens for t in self.raw)
        self.known.add(node.node_id)
        return True

    # ------------------------------------------------------------------ figures

    @property
    def chain_tokens(self) -> int:
        return sum(n.tokens for n in self.chain)

    @property
    def raw_tokens(self) -> int:
        return self.raw_total

    @property
    def context_tokens(self) -> int:
        """What the conversation takes in the model's context now: the chain's summaries and the raw turns."""
        return self.chain_tokens + self.raw_tokens

    @property
    def covered_tokens(self) -> int:
        """Raw tokens the chain stands for."""
        return sum(n.covered_tokens for n in self.chain)

    @property
    def covered_through(self) -> int:
        """The last message seq the chain stands for (0 before the first compaction)."""
        return max((n.last_seq for n in self.chain), default=0)

    def copy(self) -> "DiscussionContext":
        return DiscussionContext(self.agent, self.discussion, self.turns, list(self.chain), list(self.raw), set(self.known),
                                 self.raw_total)

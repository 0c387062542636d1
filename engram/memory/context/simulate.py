"""A conversation through the compaction rules without a log: what the ContextCompactor policy would decide.

For the benchmark, the demo's comparison of strategies, and tests of the pure core. The policy and this
driver make the same decisions: after each message the context is checked against the threshold and the
turns due are compacted with the configured strategy (no Observer notes are in play here: a hybrid
compaction observes its whole span itself).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from engram.config.agent import AgentConfig
from engram.events.background import ContextCompacted
from engram.events.cognitive import TraceEncoded
from engram.kernel.tokens import estimate_tokens
from engram.memory.context import rules
from engram.memory.context.chain import DiscussionContext
from engram.memory.context.compactor import Compactor
from engram.providers.llm.types import ChatLine

if TYPE_CHECKING:
    from engram.providers.llm.tasks import MemoryTasks


@dataclass
class Simulation:
    context: DiscussionContext
    events: list[tuple[int, ContextCompacted]] = field(default_factory=list)  # (trigger seq, event)
    traces: list[TraceEncoded] = field(default_factory=list)
    compaction_seconds: list[float] = field(default_factory=list)  # wall time of each compaction (all its nodes)
    raw_tokens: int = 0  # tokens of every message seen

    @property
    def compression_ratio(self) -> float:
        """Raw tokens the chain stands for over the chain's tokens (0 before the first compaction)."""
        c = self.context
        return round(c.covered_tokens / c.chain_tokens, 2) if c.chain_tokens else 0.0

    @property
    def context_ratio(self) -> float:
        """The whole conversation's tokens over what it takes in the context now."""
        return round(self.raw_tokens / self.context.context_tokens, 2) if self.context.context_tokens else 0.0


def simulate(
    lines: Sequence[ChatLine],
    config: AgentConfig,
    tasks: MemoryTasks,
    *,
    agent: str = "agent",
    discussion: str = "discussion",
    clock: Callable[[], float] = time.perf_counter,
) -> Simulation:
    by_seq = {line.seq: line for line in lines}
    sim = Simulation(DiscussionContext(agent, discussion))
    compactor = Compactor(tasks, clock)
    ic = rules.effective(config)
    for line in lines:
        tokens = estimate_tokens(line.content)
        sim.raw_tokens += tokens
        sim.context.add_message(line.seq, tokens)
        span = rules.due(sim.context, ic)
        if not span:
            continue
        started = clock()
        out = compactor.compact(sim.context, span, [by_seq[t.seq] for t in span], config, ts_us=line.ts_us)
        sim.compaction_seconds.append(clock() - started)
        for ev in out.events:
            sim.context.apply(ev, line.ts_us)
            sim.events.append((line.seq, ev))
        sim.traces += out.traces
    return sim

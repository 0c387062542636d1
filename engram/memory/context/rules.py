"""The rules of compaction, as small functions of a discussion's context and its settings.

- **When**: the conversation's context (chain summaries + raw turns) passes `compactionThreshold`
  of `contextWindowTokens` (0.75 of 200,000 by default); an agent with conscientiousness > 0.6 compacts
  CONSCIENTIOUSNESS_COMPACTION_FREQUENCY (1.5) times as often: its threshold is divided by it (`effective`).
- **What**: the raw turns before the last `preserveRecentTurns` (20): every one of them, so that the
  context drops well below the threshold and the next compaction waits for as many new turns.
  When the preserved turns alone pass the threshold, nothing may be compacted and nothing is.
- **How long**: a summary is asked for `ceil(input / targetCompressionRatio)` tokens (8x), at most
  `maxSummaryChainTokens` (a node never takes more than the chain's whole budget), and at least
  `ceil(covered / 1000)`: compression stops at 1000x of the raw turns a node stands for.
  The sliding summary grows by `ceil(span / ratio)` per compaction up to `maxSummaryChainTokens`.
- **Merging upward** (hierarchical, hybrid): while the chain passes `maxSummaryChainTokens`, the
  oldest run of at least two consecutive nodes of one level merges into one node a level up
  (L0 -> L1 -> L2; L2 is the top, where nodes merge into L2 again); when no two neighbours share a
  level, the two oldest nodes merge. A merge that could not shorten its nodes (already at 1000x) is
  not made: the next run is tried.
"""

from __future__ import annotations

import math

from engram.config import defaults as d
from engram.config.agent import AgentConfig, InfiniteContext
from engram.memory.context.chain import ChainNode, DiscussionContext, Turn

STRATEGY_PREFIX = {"sliding": "s", "hierarchical": "h", "hybrid": "y"}


def effective(config: AgentConfig) -> InfiniteContext:
    """The agent's `memory.infiniteContext` as compaction applies it: with conscientiousness > 0.6 (the guide's
    "increase compaction frequency"), the threshold divided by CONSCIENTIOUSNESS_COMPACTION_FREQUENCY."""
    ic = config.memory.infinite_context
    if config.personality.conscientiousness <= d.HIGH_TRAIT:
        return ic
    return ic.model_copy(update={"compaction_threshold": ic.compaction_threshold / d.CONSCIENTIOUSNESS_COMPACTION_FREQUENCY})


def threshold_tokens(ic: InfiniteContext) -> int:
    """Context tokens above which a discussion is compacted."""
    return int(ic.compaction_threshold * ic.context_window_tokens)


def over_threshold(ctx: DiscussionContext, ic: InfiniteContext) -> bool:
    return ctx.context_tokens > threshold_tokens(ic)


def compactable(ctx: DiscussionContext, ic: InfiniteContext) -> list[Turn]:
    """The raw turns a compaction may take: all but the last `preserveRecentTurns`."""
    keep = ic.preserve_recent_turns
    return ctx.raw[: max(0, len(ctx.raw) - keep)]


def due(ctx: DiscussionContext, ic: InfiniteContext) -> list[Turn]:
    """The turns to compact now (empty when compaction is off, not due, or nothing may be compacted)."""
    if not ic.enabled or not over_threshold(ctx, ic):
        return []
    return compactable(ctx, ic)


def summary_target(input_tokens: int, covered_tokens: int, ic: InfiniteContext) -> int:
    """Tokens asked of a summary of `input_tokens` standing for `covered_tokens` raw tokens."""
    steered = math.ceil(input_tokens / ic.target_compression_ratio)
    floor = math.ceil(covered_tokens / d.MAX_COMPRESSION_RATIO)
    return max(1, min(steered, ic.max_summary_chain_tokens), floor)


def sliding_target(previous_tokens: int, span_tokens: int, covered_tokens: int, ic: InfiniteContext) -> int:
    """The rolling summary's length after absorbing `span_tokens` more."""
    grown = previous_tokens + math.ceil(span_tokens / ic.target_compression_ratio)
    floor = math.ceil(covered_tokens / d.MAX_COMPRESSION_RATIO)
    return max(1, min(grown, ic.max_summary_chain_tokens), floor)


def merge_runs(chain: list[ChainNode], ic: InfiniteContext) -> list[list[ChainNode]]:
    """The merges to try now, in order (none when the chain is within its budget): the runs of at least
    two consecutive nodes of one level, oldest first, then neighbouring pairs, oldest first. The first
    that would shorten its nodes is made (a run already at 1000x of its turns would not)."""
    if sum(n.tokens for n in chain) <= ic.max_summary_chain_tokens or len(chain) < 2:
        return []
    runs: list[list[ChainNode]] = []
    i = 0
    while i < len(chain):
        j = i
        while j + 1 < len(chain) and chain[j + 1].level == chain[i].level:
            j += 1
        if j > i:
            runs.append(chain[i : j + 1])
        i = j + 1
    pairs = [chain[k : k + 2] for k in range(len(chain) - 1)]
    return runs + [p for p in pairs if p not in runs]


def merge_run(chain: list[ChainNode], ic: InfiniteContext) -> list[ChainNode]:
    """The first merge to try (empty when the chain is within its budget)."""
    runs = merge_runs(chain, ic)
    return runs[0] if runs else []


def merged_level(nodes: list[ChainNode]) -> int:
    return min(max(n.level for n in nodes) + 1, d.MAX_SUMMARY_LEVEL)


def node_id(strategy: str, level: int, first_seq: int, last_seq: int) -> str:
    """Unique within a discussion: a node is its strategy, level and the messages it stands for."""
    return f"{STRATEGY_PREFIX.get(strategy, strategy[:1])}L{level}-{first_seq}-{last_seq}"


def ratio(input_tokens: int, output_tokens: int) -> float:
    """A compression ratio as reported: input over output (0 when nothing came out)."""
    return round(input_tokens / output_tokens, 2) if output_tokens else 0.0

"""The rules of compaction, pinned to the Wunderland guide's numbers."""

from __future__ import annotations

from tests.memory.context.helpers import config

from engram.config.agent import AgentConfig
from engram.memory.context import rules
from engram.memory.context.chain import ChainNode, DiscussionContext
from engram.memory.context.rules import compactable, due, merge_run, merged_level, summary_target, threshold_tokens


def node(level: int, tokens: int, first: int, last: int) -> ChainNode:
    return ChainNode(node_id=f"n{level}-{first}", strategy="hierarchical", level=level, first_seq=first, last_seq=last,
                     first_turn=first, last_turn=last, summary="s", tokens=tokens, covered_tokens=tokens * 8)


def context_of(tokens: list[int]) -> DiscussionContext:
    ctx = DiscussionContext("a", "d")
    for seq, t in enumerate(tokens, 1):
        ctx.add_message(seq, t)
    return ctx


def test_the_defaults_are_the_guides():
    ic = AgentConfig().memory.infinite_context
    assert ic.enabled is True
    assert ic.strategy == "sliding"
    assert ic.compaction_threshold == 0.75
    assert ic.preserve_recent_turns == 20
    assert ic.transparency_level == "full"
    assert ic.max_summary_chain_tokens == 2_000
    assert ic.target_compression_ratio == 8
    assert ic.context_window_tokens == 200_000
    assert threshold_tokens(ic) == 150_000
    from engram.config import defaults as d

    assert (d.MAX_SUMMARY_LEVEL, d.MAX_COMPRESSION_RATIO) == (2, 1_000)


def test_compaction_starts_above_three_quarters_of_the_window():
    ic = config(contextWindowTokens=1_000).memory.infinite_context
    at = context_of([30] * 25)  # 750 tokens: at the threshold, not above it
    assert at.context_tokens == 750 and due(at, ic) == []
    above = context_of([30] * 25 + [1])  # 751 tokens over 26 turns
    assert [t.seq for t in due(above, ic)] == [1, 2, 3, 4, 5, 6]  # all but the last 20
    ic5 = config(contextWindowTokens=1_000, preserveRecentTurns=5).memory.infinite_context
    assert [t.seq for t in due(above, ic5)] == list(range(1, 22))


def test_the_last_twenty_turns_are_never_compacted():
    ic = config(contextWindowTokens=1_000).memory.infinite_context
    ctx = context_of([100] * 20)  # 2,000 tokens, far above the threshold, but only 20 turns
    assert rules.over_threshold(ctx, ic)
    assert due(ctx, ic) == []
    ctx.add_message(21, 100)
    assert [t.seq for t in due(ctx, ic)] == [1]
    assert [t.seq for t in compactable(context_of([10] * 25), ic)] == [1, 2, 3, 4, 5]


def test_disabled_infinite_context_never_compacts():
    ic = config(contextWindowTokens=1_000, enabled=False).memory.infinite_context
    assert due(context_of([100] * 40), ic) == []


def test_the_target_ratio_steers_summary_length_within_the_chain_budget_and_the_1000x_floor():
    ic = AgentConfig().memory.infinite_context
    assert summary_target(8_000, 8_000, ic) == 1_000  # 8x
    assert summary_target(80_000, 80_000, ic) == 2_000  # capped at maxSummaryChainTokens
    assert summary_target(400, 3_000_000, ic) == 3_000  # never past 1000x of what it stands for
    ic4 = config(targetCompressionRatio=4).memory.infinite_context
    assert summary_target(8_000, 8_000, ic4) == 2_000
    assert rules.sliding_target(100, 800, 2_000, ic) == 200  # grows by span / 8
    assert rules.sliding_target(1_990, 800, 100_000, ic) == 2_000  # up to the chain budget


def test_oldest_same_level_nodes_merge_upward_only_past_the_chain_budget():
    ic = config(maxSummaryChainTokens=100).memory.infinite_context
    within = [node(0, 50, 1, 10), node(0, 50, 11, 20)]
    assert merge_run(within, ic) == []  # exactly at the budget
    chain = [node(1, 30, 1, 20), node(1, 30, 21, 40), node(0, 25, 41, 50), node(0, 25, 51, 60)]
    run = merge_run(chain, ic)
    assert [n.first_seq for n in run] == [1, 21]  # the oldest run, not the largest
    assert merged_level(run) == 2
    top = [node(2, 60, 1, 40), node(1, 50, 41, 60)]
    assert [n.first_seq for n in merge_run(top, ic)] == [1, 41]  # no neighbours share a level: the two oldest
    assert merged_level([node(2, 1, 1, 2), node(2, 1, 3, 4)]) == 2  # L2 is the top of the tree

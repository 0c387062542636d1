"""The `chatSummarySummarizer` merge loop: new chunk memories folded into the rolling summary.

While more than `loopIfMemoriesExceed` new memories wait, the oldest `loopIfMemoriesExceed` of
them are merged into the summary as one batch (and saved: each batch is its own event). What
is left is merged only when it holds at least `minMemoriesPerSummary` memories; otherwise it
waits for the next update. Memories are merged oldest first, each exactly once.

Example (the guide's defaults, 3 and 3): 7 new memories give batches of 3 and 3, and the last
one waits; 3 new memories give one batch of 3; 2 give nothing yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram.config import defaults as d


@dataclass(frozen=True, slots=True)
class MergePolicy:
    min_memories_per_summary: int = d.MIN_MEMORIES_PER_SUMMARY
    loop_if_memories_exceed: int = d.LOOP_IF_MEMORIES_EXCEED

    def __post_init__(self) -> None:
        if self.min_memories_per_summary < 1:
            raise ValueError(f"minMemoriesPerSummary must be at least 1, got {self.min_memories_per_summary}")
        if self.loop_if_memories_exceed < 1:
            raise ValueError(f"loopIfMemoriesExceed must be at least 1, got {self.loop_if_memories_exceed}")


def plan_merges(waiting: int, policy: MergePolicy) -> list[int]:
    """Batch sizes to merge now, oldest memories first (an empty list: nothing to do yet)."""
    batches = []
    left = waiting
    while left > policy.loop_if_memories_exceed:
        batches.append(policy.loop_if_memories_exceed)
        left -= policy.loop_if_memories_exceed
    if left > 0 and left >= policy.min_memories_per_summary:
        batches.append(left)
    return batches

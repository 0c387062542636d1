"""LLM bookkeeping events: Message Batches of bulk regeneration, so that a crash loses no batch.

A submission is recorded before it is sent (`LlmBatchPrepared`), once the API has accepted it
(`LlmBatchSubmitted`), and once its results were handed on (`LlmBatchCollected`). Resuming
folds these: prepared but not submitted → submit; submitted but not collected → poll and collect.
Projections ignore them; they hold no memory.
"""

from __future__ import annotations

import msgspec

from engram.events.base import Event


class BatchRequestRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One request of a batch: its custom_id and the task input it was rendered from."""

    custom_id: str
    task_input: str  # the msgspec JSON of an engram.providers.llm.inputs task input
    prompt_hash: str
    model: str


class LlmBatchPrepared(Event, tag="LlmBatchPrepared", frozen=True):
    submission_id: str
    endpoint: str
    requests: tuple[BatchRequestRecord, ...]


class LlmBatchSubmitted(Event, tag="LlmBatchSubmitted", frozen=True):
    submission_id: str
    batch_id: str


class LlmBatchCollected(Event, tag="LlmBatchCollected", frozen=True):
    submission_id: str
    batch_id: str
    succeeded: int
    failed: int

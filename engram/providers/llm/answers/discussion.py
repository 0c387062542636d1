"""Answers of the discussion-memory tasks: chunk summaries, the rolling summary, structured
memories, schema summaries, HyDE, and context compaction."""

from __future__ import annotations

import msgspec

from engram.kernel.tokens import estimate_tokens
from engram.providers.llm import inputs as i
from engram.providers.llm.answers.common import AnswerInvalid, SENTIMENTS, as_json, convert
from engram.providers.llm.offline.analysis import text_units
from engram.providers.llm.offline.summarize import summary_text
from engram.providers.llm.prompts import EMPTY, line_label, numbered_transcript, transcript, wilmer_values
from engram.providers.llm.types import Compaction, StructuredMemory

# ---------------------------------------------------------------- text tasks


def summarize_chunk_values(t: i.SummarizeChunk) -> dict[str, str]:
    v = wilmer_values(transcript(t.lines), t.recent_memories, t.all_memories, t.chat_summary)
    v["MaxTokens"] = str(t.max_tokens)
    return v


def merge_values(t: i.MergeSummary) -> dict[str, str]:
    v = wilmer_values("\n".join(t.new_memories), t.new_memories, t.all_memories, t.previous_summary, t.new_memories)
    v["MaxTokens"] = str(t.max_tokens)
    return v


def schema_values(t: i.SummarizeSchema) -> dict[str, str]:
    return {"Members": "\n".join(f"- {m}" for m in t.members) or EMPTY, "MaxTokens": str(t.max_tokens)}


def hyde_values(t: i.Hyde) -> dict[str, str]:
    return {"Query": t.query, "MaxTokens": str(t.max_tokens)}


# ---------------------------------------------------------------- structured memory


def memory_values(t: i.ExtractMemory) -> dict[str, str]:
    return {**wilmer_values(transcript(t.lines)), "MaxTokens": str(t.max_tokens)}


class _MemoryAnswer(msgspec.Struct):
    title: str
    summary: str
    entities: list[str] = []
    key_phrases: list[str] = []
    sentiment: str | None = None
    topics: list[str] = []


def decode_memory(t: i.ExtractMemory, answer: str) -> StructuredMemory:
    a = convert(as_json(answer), _MemoryAnswer, "structured memory")
    if not a.title.strip() or not a.summary.strip():
        raise AnswerInvalid("title and summary must not be empty")
    sentiment = a.sentiment.lower().strip() if a.sentiment else None
    return StructuredMemory(
        title=a.title.strip(),
        summary=a.summary.strip(),
        entities=tuple(dict.fromkeys(e.strip() for e in a.entities if e.strip())),
        key_phrases=tuple(dict.fromkeys(p.strip() for p in a.key_phrases if p.strip())),
        sentiment=sentiment if sentiment in SENTIMENTS else None,
        topics=tuple(dict.fromkeys(x.strip().lower() for x in a.topics if x.strip())),
    )


# ---------------------------------------------------------------- compaction


class _CompactAnswer(msgspec.Struct):
    summary: str
    preserved_entities: list[str] = []
    dropped: list[str] = []


def compact_values(t: i.Compact) -> dict[str, str]:
    v = wilmer_values(numbered_transcript(t.lines, by_id=True), chat_summary=t.previous_summary)
    v["TargetTokens"] = str(t.target_tokens)
    return v


def decode_compaction(t: i.Compact, answer: str) -> Compaction:
    a = convert(as_json(answer), _CompactAnswer, "compaction")
    summary = a.summary.strip()
    if not summary:
        raise AnswerInvalid("the summary is empty")
    if estimate_tokens(summary) > t.target_tokens:
        # The budget is a hard limit: keep the model's best sentences that fit.
        summary, _ = summary_text(text_units([summary]), t.target_tokens)
    ids = {line_label(line): line.message_id or line_label(line) for line in t.lines}
    return Compaction(
        summary=summary,
        preserved_entities=tuple(dict.fromkeys(e.strip() for e in a.preserved_entities if e.strip())),
        dropped=tuple(dict.fromkeys(ids[d] for d in a.dropped if d in ids)),
    )



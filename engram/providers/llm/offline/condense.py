"""Offline summaries: chunk memories, the rolling summary, context compaction, schema clusters, HyDE."""

from __future__ import annotations

import re
from typing import Sequence

from engram.kernel.tokens import CHARS_PER_TOKEN
from engram.providers.llm.offline import tuning as k
from engram.providers.llm.offline.analysis import Unit, analyse, text_units
from engram.providers.llm.offline.keyphrases import key_phrases
from engram.providers.llm.offline.structured import summary_budget
from engram.providers.llm.offline.summarize import summary_text
from engram.providers.llm.offline.text import clip_words, content_stems
from engram.providers.llm.types import ChatLine, Compaction


def summarize_chunk(lines: Sequence[ChatLine], max_tokens: int) -> str:
    """A chunk memory: the chunk's best sentences in third person. Earlier memories and the
    rolling summary (which an LLM prompt may use) do not change what a sentence says, so the
    heuristic does not read them."""
    text, _ = summary_text(analyse(lines), summary_budget(lines, max_tokens))
    return text


def merge_summary(previous_summary: str, new_memories: Sequence[str], max_tokens: int) -> str:
    """The rolling summary: the best sentences of the old summary and the new memories, newer preferred."""
    old = text_units([previous_summary]) if previous_summary.strip() else []
    new = text_units(list(new_memories), first_seq=len(old) + 1)
    units = old + _reindexed(new, len(old))
    fresh = {u.index for u in units[len(old) :]}
    text, _ = summary_text(units, max_tokens, weight=lambda u: k.RECENCY_FACTOR if u.index in fresh else 1.0)
    return text


def _reindexed(units: list[Unit], offset: int) -> list[Unit]:
    for n, u in enumerate(units):
        u.index = offset + n
    return units


def compact(lines: Sequence[ChatLine], target_tokens: int, previous_summary: str) -> Compaction:
    """A compaction summary of at most `target_tokens`, carrying forward the previous summary's best."""
    old = text_units([previous_summary]) if previous_summary.strip() else []
    units = old + _reindexed(analyse(lines), len(old))
    text, kept = summary_text(units, target_tokens)
    kept_ids = {u.message_id for u in kept}
    dropped = tuple(dict.fromkeys(l.message_id for l in lines if l.message_id and l.message_id not in kept_ids))
    entities = tuple(dict.fromkeys(e for u in kept for e in u.names(speaker_too=True)))
    return Compaction(summary=text, preserved_entities=entities, dropped=dropped)


def summarize_schema(members: Sequence[str], max_tokens: int) -> str:
    """The member closest to the cluster's centre, with the phrases the members share."""
    if not members:
        return ""
    stems = [set(content_stems(m)) for m in members]
    def centrality(i: int) -> float:
        return sum(len(stems[i] & s) / len(stems[i] | s) for j, s in enumerate(stems) if j != i and stems[i] | s)
    centre = max(range(len(members)), key=lambda i: (centrality(i), -i))
    phrases = key_phrases("\n".join(members), k.TITLE_PHRASES + 1)
    text = members[centre].strip()
    if len(members) > 1 and phrases:
        text += f" (recurring across {len(members)} memories: {', '.join(phrases)})"
    return clip_words(text, max_tokens * CHARS_PER_TOKEN)


_QUESTION_LEAD = re.compile(
    r"^\s*(?:(?:what|when|where|who|whom|whose|which|why|how(?:\s+(?:many|much|long|often|old))?)\b\s*)?"
    r"(?:(?:do|does|did|is|are|was|were|has|have|had|can|could|will|would|should|might)\b\s*)?",
    re.IGNORECASE,
)


def hyde(query: str, max_tokens: int) -> str:
    """A declarative form of the question, without question words: what a matching memory would
    mention. It adds no facts: a heuristic cannot know the answer, and must not pretend to."""
    text = _QUESTION_LEAD.sub("", query.strip()).rstrip(" ?")
    text = text[:1].upper() + text[1:] if text else query.strip()
    return clip_words(text, max_tokens * CHARS_PER_TOKEN)

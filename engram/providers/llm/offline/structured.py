"""The offline QualityMemory: title, extractive summary, entities, RAKE key phrases, sentiment, topics."""

from __future__ import annotations

import math
from typing import Sequence

from engram.kernel.tokens import estimate_tokens
from engram.providers.llm.offline import tuning as k
from engram.providers.llm.offline.analysis import analyse
from engram.providers.llm.offline.cues import topic_of
from engram.providers.llm.offline.keyphrases import key_phrases
from engram.providers.llm.offline.sentiment import sentiment_label
from engram.providers.llm.offline.summarize import summary_text
from engram.providers.llm.offline.text import content_words, words
from engram.providers.llm.types import ChatLine, StructuredMemory


def summary_budget(lines: Sequence[ChatLine], max_tokens: int) -> int:
    """Tokens an offline summary of `lines` may use: a share of the input, within the caller's maximum."""
    tokens = sum(estimate_tokens(line.content) for line in lines)
    return min(max_tokens, max(k.MIN_SUMMARY_TOKENS, math.ceil(tokens * k.CHUNK_SUMMARY_SHARE)))


def _casing(text: str) -> dict[str, str]:
    """How the text itself writes each word when it capitalises it (for titles: "LGBTQ", "Paris")."""
    out: dict[str, str] = {}
    for w in words(text):
        if w[:1].isupper():
            out.setdefault(w.lower(), w)
    return out


def _title(lines: Sequence[ChatLine], phrases: list[str], text: str) -> str:
    cased = _casing(text)
    shown = [" ".join(cased.get(w, w) for w in p.split()) for p in phrases[: k.TITLE_PHRASES]]
    speakers = list(dict.fromkeys(line.speaker for line in lines))[:2]
    subject = ", ".join(shown) if shown else "conversation"
    subject = subject[:1].upper() + subject[1:]
    return f"{' & '.join(speakers)}: {subject}" if speakers else subject


def topics(text: str) -> tuple[str, ...]:
    counts: dict[str, int] = {}
    for w in content_words(text):
        t = topic_of(w)
        if t:
            counts[t] = counts.get(t, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])  # stable: ties keep first appearance
    return tuple(t for t, _ in ranked[: k.MAX_TOPICS])


def extract_memory(lines: Sequence[ChatLine], max_tokens: int) -> StructuredMemory:
    units = analyse(lines)
    text = "\n".join(line.content for line in lines)
    summary, _ = summary_text(units, summary_budget(lines, max_tokens))
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for u in units:
        for e in u.entity_texts(speaker_too=True):
            key = e.lower()
            counts[key] = counts.get(key, 0) + 1
            first.setdefault(key, e)
    ranked = sorted(first, key=lambda key: -counts[key])  # stable: ties keep first appearance
    phrases = key_phrases(text, k.MAX_KEY_PHRASES)
    return StructuredMemory(
        title=_title(lines, phrases, text),
        summary=summary,
        entities=tuple(first[key] for key in ranked[: k.MAX_ENTITIES]),
        key_phrases=tuple(phrases),
        sentiment=sentiment_label([u.text for u in units]),
        topics=topics(text),
    )

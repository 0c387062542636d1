"""Provenance of a message's words: what the assistant says in its own words, and what it quotes of memory.

The memory a reply was written with is recorded with it (`record_injected`, `MessageAppended.metadata`); a reply's
sentences that repeat one injected passage (`quotes_memory`) and the offline responder's labelled replies are not
the assistant's own words (`own_words`). Cognitive memory (auto-ingest, the Observer) and discussion memory (chunk
and vector memories) make memories of own words only, so a fact quoted back by the assistant stays attributed to
whoever first said it.
"""

from __future__ import annotations

import re
from typing import Sequence

from engram.providers.llm.offline.respond import labelled
from engram.providers.search.bm25 import tokenize


# The memory a reply was written with, recorded with the assistant's message (`MessageAppended.metadata`) by
# `engram chat` and the proxy: the passages they injected for that turn (recall results, summaries, the profile).
INJECTED_MEMORY_KEY = "injected_memory"
_PASSAGE_SEP = "\n\x1e"
# A recorded injection is capped so the message stays within `limits` (the earliest passages are kept: the
# context builders put the most relevant first).
INJECTED_MEMORY_MAX_CHARS = 12_000
# The quote rule (see `quotes_memory`).
QUOTE_CONTAINMENT = 0.6
QUOTE_MIN_WORDS = 2
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def record_injected(passages) -> dict[str, str]:
    """The metadata that records `passages` (what memory injected for a turn) with the reply written from them."""
    out, size = [], 0
    for p in (" ".join(str(p).split()) for p in passages):
        if not p:
            continue
        if size + len(p) + len(_PASSAGE_SEP) > INJECTED_MEMORY_MAX_CHARS:
            break
        out.append(p)
        size += len(p) + len(_PASSAGE_SEP)
    return {INJECTED_MEMORY_KEY: _PASSAGE_SEP.join(out)} if out else {}


def injected_memory(metadata) -> tuple[str, ...]:
    """The passages recorded with a message by `record_injected` (none for a message without them)."""
    if not metadata:
        return ()
    text = metadata.get(INJECTED_MEMORY_KEY, "")
    return tuple(p for p in text.split(_PASSAGE_SEP) if p.strip())


def quotes_memory(sentence: str, passages: Sequence[frozenset[str]]) -> bool:
    """Whether a reply's `sentence` repeats one of the injected `passages` (each given as its keyword tokens).

    The rule: the sentence has at least QUOTE_MIN_WORDS (2) keyword tokens (stemmed words without stopwords,
    `engram.providers.search.bm25.tokenize`), and at least QUOTE_CONTAINMENT (60%) of them occur in ONE injected passage.
    Containment, not symmetric similarity: a reply restates part of a passage ("You live in Lisbon" of "User: my
    name is Priya and I live in Lisbon"), in its own function words and person; what it adds of its own ("I'd
    try the tram to Belém") shares few content words with what it was shown."""
    words = set(tokenize(sentence))
    if len(words) < QUOTE_MIN_WORDS:
        return False
    return any(len(words & p) >= QUOTE_CONTAINMENT * len(words) for p in passages)


def own_words(role: str, text: str, memory: Sequence[str] = ()) -> str:
    """What a message says in its speaker's own words: what the memory tasks may take as new information.

    Provenance (issue 12): the assistant quoting memory — recall results, summaries, the offline responder's
    labelled quotes — says nothing new. A reply from the offline responder is nothing but such quotes under
    its label ("[offline heuristic, not a language model] The memories most relevant ...:" and bullets), so
    none of it is the assistant's own. A reply written by a model keeps its sentences minus those that repeat
    the `memory` injected for its turn (recorded with it, `injected_memory`; the rule: `quotes_memory`); without
    a record it is kept whole (auto-ingest also drops an assistant's fact that restates an existing memory,
    `engram.memory.cognitive.ingest`). Other roles speak for themselves.
    """
    if role != "assistant":
        return text
    if labelled(role, text):
        return ""
    if not memory:
        return text
    passages = [frozenset(tokenize(p)) for p in memory]
    kept = [s for s in _SENTENCE.split(text) if s.strip() and not quotes_memory(s, passages)]
    return " ".join(s.strip() for s in kept)

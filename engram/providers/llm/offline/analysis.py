"""Sentences of a span of messages, each analysed once: speaker, content stems, entities, cues, emotion, time.

Every offline task works on these units, so the analysis (the costly part) runs once per call.
"""

from __future__ import annotations

import re
from typing import Sequence

from engram.kernel.tokens import estimate_tokens
from engram.providers.llm.offline import cues, tuning as k
from engram.providers.llm.offline.entities import Entity, capitals_after_first, extract, tokens
from engram.providers.llm.offline.rewrite import trim_filler
from engram.providers.llm.offline.sentiment import Pad, pad
from engram.providers.llm.offline.text import content_words, normalise, sentences, stem, words as words_of
from engram.providers.llm.offline.timeref import resolve
from engram.providers.llm.types import ChatLine


_NO_CUES = {name: 0 for name in cues.CUES}
# Numbers written as words count as numbers ("seven years", "a dozen eggs", "twice a week").
_WORD_NUMBER = re.compile(
    r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|"
    r"eighteen|nineteen|twenty|thirty|forty|fifty|hundred|thousand|million|dozen|twice|first|second|third)\b",
    re.IGNORECASE,
)

# The role of texts that are memories already (summaries, notes, traces), not messages.
MEMORY_ROLE = "memory"


class Unit:
    """One sentence of one message, with everything the heuristics look at."""

    __slots__ = (
        "index", "line", "seq", "ts_us", "message_id", "speaker", "text", "clean", "stems", "entities",
        "has_number", "refers_to", "cue", "_pad", "question", "chitchat", "tokens",
    )
    entities: tuple[Entity, ...]
    has_number: bool
    refers_to: str | None
    cue: dict[str, int]
    _pad: Pad | None

    def __init__(
        self, index: int, line: ChatLine, text: str, toks: list[str], known: frozenset[str], speakers: tuple[str, ...]
    ):
        self.index = index
        self.line = line
        self.seq = line.seq
        self.ts_us = line.ts_us
        self.message_id = line.message_id
        self.speaker = line.speaker
        self.text = text
        self.clean = trim_filler(text, tuple(s for s in speakers if s and s != line.speaker))
        words = content_words(cues.PLEASANTRY.sub(" ", self.clean))
        self.stems = tuple(stem(w) for w in words)
        self.question = bool(cues.QUESTION.search(text))
        self.chitchat = len(words) < k.MIN_CONTENT_WORDS
        if self.chitchat:
            # No task ever uses chit-chat, so it is not analysed further (most of the cost is below).
            self.entities, self.has_number, self.refers_to, self.cue, self._pad = (), False, None, _NO_CUES, Pad()
        else:
            self.entities = tuple(extract(text, speakers, known, toks))
            self.has_number = any(e.kind == "number" for e in self.entities) or bool(_WORD_NUMBER.search(text))
            self.refers_to = resolve(text, line.ts_us) if any(e.kind == "date" for e in self.entities) else None
            self.cue = cues.count_cues(text, cues.sentence_keys(words_of(normalise(text))))
            self._pad = None  # computed when a task asks: summaries never do
        self.tokens = estimate_tokens(text)

    @property
    def pad(self) -> Pad:
        if self._pad is None:
            self._pad = pad(self.text)
        return self._pad

    def names(self, speaker_too: bool = False) -> list[str]:
        out = [e.text for e in self.entities if e.kind in ("person", "place", "name")]
        if speaker_too and self.line.role != MEMORY_ROLE and self.speaker not in out:
            out.insert(0, self.speaker)
        return out

    def entity_texts(self, speaker_too: bool = True) -> list[str]:
        """Names, numbers and the resolved date (a relative "yesterday" means nothing out of context)."""
        out = self.names(speaker_too) + [e.text for e in self.entities if e.kind == "number"]
        if self.refers_to:
            out.append(self.refers_to)
        return list(dict.fromkeys(out))


# A sentence that opens with one of these leans on the one before ("The deadline moved. It's
# March 12 now."): kept together, the pair says what neither says alone.
_ANAPHORIC_OPENING = re.compile(r"^(?:it|it's|that|that's|this|they|they're|he|she|which)\b", re.I)
# Only short lead sentences take their continuation, so units stay sentence-sized.
_SHORT_LEAD_WORDS = 12


def joined_sentences(text: str) -> list[str]:
    """Sentences of `text`, with an anaphoric continuation joined to its short lead sentence."""
    out: list[str] = []
    for sentence in sentences(text):
        if out and _ANAPHORIC_OPENING.match(sentence) and len(out[-1].split()) <= _SHORT_LEAD_WORDS:
            out[-1] = f"{out[-1]} {sentence}"
        else:
            out.append(sentence)
    return out


def analyse(lines: Sequence[ChatLine]) -> list[Unit]:
    """The sentences of `lines` in order, analysed."""
    speakers = tuple(dict.fromkeys(line.speaker for line in lines))
    split = [(line, text, tokens(text)) for line in lines for text in joined_sentences(line.content)]
    known = capitals_after_first(toks for _, _, toks in split)
    return [Unit(n, line, text, toks, known, speakers) for n, (line, text, toks) in enumerate(split)]


def text_units(texts: Sequence[str], first_seq: int = 0) -> list[Unit]:
    """Units of plain texts (memories, summaries, traces): each text is a line without a speaker."""
    lines = [
        ChatLine(role=MEMORY_ROLE, name="", content=t, seq=first_seq + n, ts_us=0) for n, t in enumerate(texts)
    ]
    return analyse(lines)

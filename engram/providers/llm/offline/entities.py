"""Entities from surface cues: capitalised names, places, dates, numbers.

A name is a run of capitalised words. At the start of a sentence capitalisation proves nothing,
so a sentence-initial word counts only if the same text also capitalises it mid-sentence, or it
is a known speaker, or the run has several words — but a sentence-initial word that is neither,
followed by a speaker's name ("Woohoo Melanie!", "Boop Caroline"), is an interjection or a greeting,
not part of the name. A contraction ("It'll", "We're", "Don't") is never a name nor part of one,
and interjections ("Yay", "Woohoo", "Congrats") are never names on their own.
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple

from engram.providers.llm.offline.text import STOPWORDS, sentences

MONTHS = (
    "january february march april may june july august september october november december".split()
)
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTH_RE = r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
_DAY_RE = r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day"

DATE_PATTERNS = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?(?:\s+of)?\s+{_MONTH_RE}\.?,?(?:\s+\d{{4}})?\b"
    rf"|\b{_MONTH_RE}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b(?:last|next|this|coming)\s+(?:week(?:end)?|month|year|summer|winter|spring|fall|autumn|{_DAY_RE})\b"
    r"|\b(?:yesterday|today|tonight|tomorrow)\b"
    r"|\b(?:\d+|a|an|one|two|three|four|five|six|a\s+few|a\s+couple\s+of)\s+(?:days?|weeks?|months?|years?)\s+ago\b"
    rf"|\b(?:on\s+)?{_DAY_RE}\b"
    rf"|\b(?:in\s+)?{_MONTH_RE}\s+\d{{4}}\b"
    r"|\b(?:19|20)\d{2}\b",
    re.IGNORECASE,
)
# Numbers with optional currency, decimals, percent and magnitude (dates are matched first).
NUMBER_PATTERN = re.compile(r"(?<![\w-])[$€£]?\d+(?:[.,:]\d+)*(?:\s?%|k\b|K\b|m\b|M\b)?(?![\w-])")
_DIGIT = re.compile(r"\d")
_LOWER_WORD = re.compile(r"[a-z]+")
# Words without which no date expression (other than digits) can match.
_DATE_WORDS = frozenset(
    MONTHS + WEEKDAYS + [m[:3] for m in MONTHS] + ["sept", "tues", "thurs"]
    + "yesterday today tonight tomorrow ago week weekend month year summer winter spring fall autumn".split()
)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’\-]*|\S")
# Lower-case words allowed inside a capitalised run ("Bank of America", "Leonardo da Vinci").
_CONNECTORS = frozenset({"of", "de", "da", "del", "van", "von", "la", "le", "du"})
_TITLES = frozenset({"mr", "mrs", "ms", "dr", "prof", "aunt", "uncle", "grandma", "grandpa"})
_PLACE_PREPOSITIONS = frozenset({"in", "at", "from", "to", "near", "visit", "visited", "visiting", "moved", "around"})
# Capitalised words that are never names on their own.
_NOT_NAMES = frozenset(
    {"i", "i'm", "i've", "i'll", "i'd", "im", "ive", "god", "omg", "lol", "ok", "okay", "hey", "hi", "hello", "wow",
     "yeah", "yes", "no", "oh", "thanks", "thank", "sure", "well", "so", "haha", "btw", "tbh", "mom", "dad",
     "yesterday", "today", "tomorrow", "tonight",
     # interjections and greetings (issue 24: "Woohoo Melanie" was a name)
     "woohoo", "woo", "wooo", "yay", "yayy", "hooray", "yup", "yep", "nope", "nah", "ugh", "hmm", "hm", "whoa", "aww",
     "aw", "ah", "ahh", "oops", "ooh", "oooh", "congrats", "congratulations", "dear", "bye", "cheers", "gosh", "geez",
     "awesome", "cool", "nice", "great", "sweet", "amazing", "lovely", "hahaha", "lmao", "yikes", "phew", "ouch"}
)
# A contraction ("It'll", "We're", "They've", "I'd", "Don't") is never a name nor part of one; a possessive ("Mel's") is.
_CONTRACTION = re.compile(r"(?:['’](?:ll|re|ve|d|m)|n['’]t)$", re.IGNORECASE)


class Entity(NamedTuple):
    text: str
    kind: str  # person | place | name | date | number


def _is_capitalised(tok: str) -> bool:
    return tok[:1].isupper() and (tok[1:2].islower() or tok[1:2] in ("", "'", "’") or tok.isupper())


def tokens(sentence: str) -> list[str]:
    """The tokens `names` reads: words and single punctuation marks."""
    return _TOKEN.findall(sentence)


def capitals_after_first(token_lists: Iterable[list[str]]) -> frozenset[str]:
    """Lower-cased tokens capitalised anywhere but first in their sentence."""
    return frozenset(tok.lower() for toks in token_lists for tok in toks[1:] if tok[:1].isupper())


def names(
    text: str,
    speakers: Iterable[str] = (),
    known: frozenset[str] | None = None,
    sentence_tokens: list[str] | None = None,
) -> list[Entity]:
    """Capitalised runs of `text` that look like names, in order of first appearance.

    `known`: words capitalised mid-sentence in the surrounding document (default: in `text`).
    `sentence_tokens`: `text` is one sentence and these are its `tokens` (saves splitting it again).
    """
    speaker_keys = {s.lower() for s in speakers}
    sents = [sentence_tokens] if sentence_tokens is not None else [_TOKEN.findall(s) for s in sentences(text)]
    mid = known if known is not None else capitals_after_first(sents)
    out: dict[str, Entity] = {}
    for toks in sents:
        if not any(tok[:1].isupper() for tok in toks):
            continue  # the usual case in chat: nothing capitalised, no name
        k = 0
        while k < len(toks):
            tok = toks[k]
            if not (tok[:1].isalpha() and _is_capitalised(tok)) or _CONTRACTION.search(tok):
                k += 1
                continue
            run = [tok]
            j = k + 1
            while j < len(toks):
                nxt = toks[j]
                if nxt.lower() in _NOT_NAMES or _CONTRACTION.search(nxt):
                    break  # "Yesterday I ..." is no name
                if nxt == "." and len(run[-1]) == 1 and run[-1].isupper() and j + 1 < len(toks) \
                        and toks[j + 1][:1].isalpha() and _is_capitalised(toks[j + 1]):
                    run[-1] += "."  # an initial: "Ursula K. Le Guin"
                    j += 1
                elif nxt[:1].isalpha() and _is_capitalised(nxt):
                    run.append(nxt)
                    j += 1
                elif nxt.lower() in _CONNECTORS and j + 1 < len(toks) and _is_capitalised(toks[j + 1]):
                    run.append(nxt)
                    j += 1
                else:
                    break
            start = k
            k = j
            # Drop leading words that are not names ("Hey Caroline" -> "Caroline").
            while run and (run[0].lower() in _NOT_NAMES or run[0].lower() in STOPWORDS) and run[0].lower() not in speaker_keys:
                run.pop(0)
                start += 1
            while run and run[-1].lower() in _CONNECTORS:
                run.pop()
            # "Woohoo Melanie": a sentence-initial word that nothing else shows to be a name, before a speaker's name.
            if start == 0 and len(run) > 1 and run[0].lower() not in mid and run[0].lower() not in speaker_keys \
                    and run[1].lower() in speaker_keys:
                run.pop(0)
                start += 1
            if not run:
                continue
            first = run[0].lower()
            if first in MONTHS or first in WEEKDAYS:
                continue  # dates are matched by date_mentions
            sentence_initial = start == 0
            if sentence_initial and len(run) == 1 and first not in mid and first not in speaker_keys and not run[0].isupper():
                continue
            if len(run) == 1 and (len(run[0].rstrip(".")) == 1 or first in _TITLES):
                continue  # "Dr" alone is a title; the name follows it
            name = " ".join(run).rstrip("'’").removesuffix("'s").removesuffix("’s")
            key = name.lower()
            if key in out:
                continue
            prev = toks[start - 1].lower() if start > 0 else ""
            title = toks[start - 2].lower() if prev == "." and start > 1 else prev
            if key in speaker_keys or title in _TITLES:
                kind = "person"
            elif prev in _PLACE_PREPOSITIONS:
                kind = "place"
            else:
                kind = "name"
            out[key] = Entity(name, kind)
    return list(out.values())


def dates_and_numbers(text: str) -> tuple[list[str], list[str]]:
    """Date mentions and numbers of `text` (digits inside a date are not numbers)."""
    dates: dict[str, str] = {}
    spans = []
    has_digit = _DIGIT.search(text) is not None
    # The date expression is long; run it only where a digit or a time word could match.
    if has_digit or not _DATE_WORDS.isdisjoint(_LOWER_WORD.findall(text.lower())):
        for m in DATE_PATTERNS.finditer(text):
            dates.setdefault(m.group(0).lower(), m.group(0))
            spans.append(m.span())
    nums: dict[str, str] = {}
    if has_digit:
        masked = text
        for a, b in reversed(spans):
            masked = masked[:a] + " " * (b - a) + masked[b:]
        for m in NUMBER_PATTERN.finditer(masked):
            nums.setdefault(m.group(0), m.group(0).strip())
    return list(dates.values()), list(nums.values())


def date_mentions(text: str) -> list[str]:
    return dates_and_numbers(text)[0]


def numbers(text: str) -> list[str]:
    return dates_and_numbers(text)[1]


def extract(
    text: str,
    speakers: Iterable[str] = (),
    known: frozenset[str] | None = None,
    sentence_tokens: list[str] | None = None,
) -> list[Entity]:
    """Names, places, dates and numbers of `text`, each once, names first."""
    found = names(text, speakers, known, sentence_tokens)
    dates, nums = dates_and_numbers(text)
    found += [Entity(x, "date") for x in dates]
    found += [Entity(x, "number") for x in nums]
    return found

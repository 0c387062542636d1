"""Sentences, words and stopwords: the tokenisation every offline heuristic shares."""

from __future__ import annotations

import re
from functools import lru_cache

# Sentence ends at . ! ? … (plus closing quotes/brackets) before whitespace, or at a line break.
# The pattern starts with a character class, which lets the regex engine skip ahead quickly.
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)|\n")
# Abbreviations after which a period does not end a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e approx dept inc ltd co no fig jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")

STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during
    each even ever every few for from further get gets got had hadn't has hasn't have haven't having he he'd
    he'll he's her here here's hers herself him himself his how how's however i i'd i'll i'm i've if in into
    is isn't it it's its itself just let's like lot lots me more most much mustn't my myself no nor not now of
    off on once only or other ought our ours ourselves out over own really same shan't she she'd she'll she's
    should shouldn't so some such than that that's the their theirs them themselves then there there's these they
    they'd they'll they're they've this those through to too under until up upon us very was wasn't we we'd
    we'll we're we've were weren't what what's when when's where where's which while who who's whom why why's
    will with won't would wouldn't yeah yes you you'd you'll you're you've your yours yourself yourselves
    oh hey hi hello wow ok okay um uh hmm haha lol thanks thank please sure well still way one thing things
    something anything everything going gonna get getting got make made really quite pretty kind sort maybe
    definitely totally absolutely actually literally super great good nice cool awesome amazing glad
    """.split()
)


def sentences(text: str) -> list[str]:
    """`text` split into sentences (abbreviations such as "Dr." do not end one)."""
    parts: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        end = m.end() if m.group(0) != "\n" else m.start()
        piece = text[start:end].strip()
        if piece:
            parts.append(piece)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    out: list[str] = []
    for part in parts:
        if out and out[-1].endswith("."):
            last = out[-1].rsplit(None, 1)[-1]
            last_word = last.rstrip(".").lower()
            # An initial ("Ursula K. Le Guin", "J. R. R. Tolkien") before a capitalised word ends no sentence.
            initial = len(last) == 2 and last[0].isupper() and part[:1].isupper()
            if last_word in _ABBREVIATIONS or initial:
                out[-1] = f"{out[-1]} {part}"
                continue
        out.append(part)
    return out


def words(text: str) -> list[str]:
    """Words and numbers of `text`, case kept."""
    return _WORD.findall(text)


def normalise(text: str) -> str:
    """Lower case, with typographic apostrophes made plain (so "I’m" and "I'm" are one word)."""
    low = text.lower()
    return low.replace("’", "'") if "’" in low else low


@lru_cache(maxsize=1 << 16)  # pure and hot: chat reuses a small vocabulary
def stem(word: str) -> str:
    """A crude suffix stripper: enough to match "paints"/"painted"/"painting" to one key."""
    w = normalise(word)
    if len(w) <= 4:
        return w
    for suffix in ("ingly", "edly", "ing", "ed", "ies", "es", "ly", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            base = w[: -len(suffix)]
            if suffix == "ies":
                base += "y"
            return base
    return w


def content_words(text: str) -> list[str]:
    """Lower-cased words of `text` that carry content (no stopwords, no one- or two-letter words)."""
    return [w for w in _WORD.findall(normalise(text)) if len(w) > 2 and w not in STOPWORDS]


def content_stems(text: str) -> list[str]:
    return [stem(w) for w in content_words(text)]


def clip_words(text: str, max_chars: int) -> str:
    """`text` cut at a word boundary to at most `max_chars` characters, marked with an ellipsis."""
    if len(text) <= max_chars:
        return text
    cut = text[: max(0, max_chars - 1)].rsplit(" ", 1)[0].rstrip(" ,;:-")
    return cut + "…"

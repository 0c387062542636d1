"""Key phrases by RAKE (Rose et al., 2010): candidate phrases are runs of content words between
stopwords and punctuation; a word scores degree/frequency; a phrase scores the sum of its words."""

from __future__ import annotations

import re

from engram.providers.llm.offline.text import STOPWORDS, normalise

_SPLIT = re.compile(r"[^A-Za-z0-9'’\- ]+")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
# Longer runs are usually a clause that happens to lack a stopword, not a phrase.
MAX_PHRASE_WORDS = 3
# A phrase repeated in the text is a topic, not an aside: each repeat adds this share of its score.
REPEAT_BONUS = 0.5
# Words too generic to lead or end a phrase in chat.
_WEAK = frozenset(
    "feel feels felt think thought know knew want wanted need needed lot lots time times day days bit kinda "
    "guess mean means said say tell told see saw look looks looking talk talking last next year years week weeks "
    "month months today yesterday tomorrow ago recently".split()
)


def _candidates(text: str) -> list[list[str]]:
    out: list[list[str]] = []
    for fragment in _SPLIT.split(text):
        run: list[str] = []
        for raw in _WORD.findall(fragment):
            w = normalise(raw)
            if w in STOPWORDS or len(w) < 3 or w.isdigit():
                if run:
                    out.append(run)
                run = []
            else:
                run.append(w)
        if run:
            out.append(run)
    phrases = []
    for run in out:
        while run and run[0] in _WEAK:
            run = run[1:]
        while run and run[-1] in _WEAK:
            run = run[:-1]
        for k in range(0, len(run), MAX_PHRASE_WORDS):
            part = run[k : k + MAX_PHRASE_WORDS]
            if part:
                phrases.append(part)
    return phrases


def key_phrases(text: str, limit: int) -> list[str]:
    """The `limit` best RAKE phrases of `text`, best first (ties: first appearance)."""
    phrases = _candidates(text)
    freq: dict[str, int] = {}
    degree: dict[str, int] = {}
    for p in phrases:
        for w in p:
            freq[w] = freq.get(w, 0) + 1
            degree[w] = degree.get(w, 0) + len(p)
    repeats: dict[str, int] = {}
    for p in phrases:
        key = " ".join(p)
        repeats[key] = repeats.get(key, 0) + 1
    scored: dict[str, tuple[float, int]] = {}
    for order, p in enumerate(phrases):
        phrase = " ".join(p)
        if phrase in scored:
            continue
        score = sum(degree[w] / freq[w] for w in p)
        scored[phrase] = (score * (1 + REPEAT_BONUS * (repeats[phrase] - 1)), order)
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
    return [phrase for phrase, _ in ranked[:limit]]

"""BM25 keyword ranking: the keyword half of hybrid search, and the raw-turn baseline."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from typing import Callable, Iterable, Mapping

import Stemmer

# Okapi BM25 constants (Robertson & Zaragoza): term-frequency saturation and length normalisation.
BM25_K1 = 1.2
BM25_B = 0.75

# A word: letters and digits, with inner hyphens or apostrophes ("de-stress", "e-mail", "Caroline's").
_TOKEN = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")
# Function words carry no topic; dropping them keeps keyword scores about content.
STOPWORDS = frozenset(
    """a an and are as at be been but by did do does for from had has have he her hers him his how i if in into is it
    its me my of on or our she so than that the their them then there these they this to too was we were what when
    where which who whom why will with would you your yours about after again all am any because before being
    both can could each few further here just more most no nor not now only other out over own same should some such
    up very s t don""".split()
    # contractions, written without their apostrophe (see `tokenize`)
    + "dont doesnt didnt cant wont isnt arent wasnt werent im ive id youre youve theyre thats whats lets".split()
)
# The version of `tokenize`: an index built by another version (a policy snapshot) must be rebuilt.
# 2: Snowball stems (PyStemmer) and compound normalisation (1: a light suffix strip).
TOKENIZER_VERSION = 2
# Parts of a hyphenated compound shorter than this are not indexed on their own ("de" of "de-stress").
MIN_PART_CHARS = 3
_STEMMER = Stemmer.Stemmer("english")


def tokenize(text: str) -> list[str]:
    """Lower-case word stems (Snowball English, Porter's second stemmer) without stopwords.

    Compounds are normalised: a hyphenated word stands for the word written solid and for its parts, so
    "de-stress", "destress" and "de stress" meet ("destress"), and "self-care" is found by "self care".
    Typographic apostrophes count as plain ones; a possessive "'s" is dropped.
    """
    out = []
    for word in _TOKEN.findall(text.lower().replace("’", "'")):
        if "'" in word:
            word = word.replace("'s", "") if word.endswith("'s") else word.replace("'", "")
        if "-" in word:
            parts = [p for p in word.split("-") if p]
            solid = "".join(parts)
            if solid not in STOPWORDS:
                out.append(solid)
            out += [p for p in parts if len(p) >= MIN_PART_CHARS and p not in STOPWORDS]
        elif word and word not in STOPWORDS:
            out.append(word)
    return stems(out)


def stems(words: list[str]) -> list[str]:
    return _STEMMER.stemWords(words)


def stem(tok: str) -> str:
    """The Snowball (English) stem of one lower-case word."""
    return _STEMMER.stemWord(tok)


class BM25:
    """An incremental BM25 index over string ids."""

    def __init__(self, k1: float = BM25_K1, b: float = BM25_B):
        self.k1, self.b = k1, b
        self._postings: dict[str, dict[str, int]] = defaultdict(dict)
        self._lengths: dict[str, int] = {}
        self._terms: dict[str, tuple[str, ...]] = {}  # key -> its distinct terms (removal touches only those)
        self._total = 0
        self.tokenizer = TOKENIZER_VERSION  # the `tokenize` its terms came from

    @property
    def current(self) -> bool:
        """Whether its terms come from this version of `tokenize` (a snapshot from before may not)."""
        return getattr(self, "tokenizer", 1) == TOKENIZER_VERSION

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, key: str, text: str) -> None:
        if key in self._lengths:
            self.remove(key)
        terms = Counter(tokenize(text))
        for term, tf in terms.items():
            self._postings[term][key] = tf
        length = sum(terms.values())
        self._lengths[key] = length
        self._terms[key] = tuple(terms)
        self._total += length

    def keys(self) -> list[str]:
        """The indexed keys, in insertion order."""
        return list(self._lengths)

    def __contains__(self, key: str) -> bool:
        return key in self._lengths

    def remove(self, key: str) -> None:
        length = self._lengths.pop(key, None)
        if length is None:
            return
        self._total -= length
        for term in self._terms.pop(key, ()):
            posting = self._postings.get(term)
            if posting is not None and posting.pop(key, None) is not None and not posting:
                del self._postings[term]

    def idf(self, term: str) -> float:
        """Okapi idf of `term` (0 for a term no document has)."""
        posting = self._postings.get(term)
        if not posting:
            return 0.0
        n = len(self._lengths)
        return math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))

    def document_share(self, term: str) -> float:
        """The share of indexed documents that hold `term` (0 for an unknown term or an empty index)."""
        posting = self._postings.get(term)
        return len(posting) / len(self._lengths) if posting and self._lengths else 0.0

    def terms_of(self, key: str) -> tuple[str, ...]:
        """The distinct terms of an indexed document (empty for an unknown key)."""
        return self._terms.get(key, ())

    def term_frequency(self, term: str, key: str) -> int:
        posting = self._postings.get(term)
        return posting.get(key, 0) if posting else 0

    def length(self, key: str) -> int:
        return self._lengths.get(key, 0)

    def search(
        self, query_terms: list[str], k: int, allowed: Callable[[str], bool] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> list[tuple[str, float]]:
        """Top-k ids for the (already tokenised) terms, OR semantics, best first; ties by id.

        `allowed`: only ids it accepts are ranked (e.g. a scope filter). Terms are summed in sorted
        order, so scores do not depend on hash randomisation. `weights`: a weight per term (default 1),
        multiplying that term's contribution (a weighted query, e.g. feedback terms).
        """
        n = len(self._lengths)
        if n == 0 or k <= 0:
            return []
        scores: dict[str, float] = defaultdict(float)
        verdict: dict[str, bool] = {}  # allowed(key), asked once per key
        saturated = self._saturation()
        for term in sorted(set(query_terms)):
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = self.idf(term) * (weights.get(term, 1.0) if weights is not None else 1.0)
            for key, tf in posting.items():
                if allowed is not None:
                    ok = verdict.get(key)
                    if ok is None:
                        ok = verdict[key] = bool(allowed(key))
                    if not ok:
                        continue
                scores[key] += idf * saturated(tf, key)
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:k]

    def joint_idf(self, term: str, other: "BM25 | None") -> float:
        """Okapi idf of `term` over this index and `other` together (as one collection); `idf` without `other`."""
        if other is None:
            return self.idf(term)
        df = len(self._postings.get(term) or ()) + len(other._postings.get(term) or ())
        if not df:
            return 0.0
        n = len(self._lengths) + len(other._lengths)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def scores(
        self, query_terms: list[str], keys: Iterable[str], weights: Mapping[str, float] | None = None,
        joint: "BM25 | None" = None,
    ) -> dict[str, float]:
        """The BM25 score of each of `keys` for the terms (0 for a key that matches none, or is not indexed);
        `weights` as in `search`. `joint`: score as if this index and `joint` were one collection (idf and
        average length of both), so the scores compare with those of the other index's documents."""
        w = weights or {}
        weighted = [(self.joint_idf(t, joint) * w.get(t, 1.0), self._postings.get(t)) for t in sorted(set(query_terms))]
        terms = [(idf, posting) for idf, posting in weighted if posting]
        out: dict[str, float] = {}
        if not terms:
            return dict.fromkeys(keys, 0.0)
        saturated = self._saturation(joint)
        for key in keys:
            total = 0.0
            for idf, posting in terms:
                tf = posting.get(key)
                if tf:
                    total += idf * saturated(tf, key)
            out[key] = total
        return out

    def _saturated(self, tf: int, key: str) -> float:
        """BM25's term-frequency saturation with length normalisation: tf·(k1+1) / (tf + k1·(1 − b + b·len/avg))."""
        return self._saturation()(tf, key)

    def _saturation(self, joint: "BM25 | None" = None) -> Callable[[int, str], float]:
        """`_saturated` with the average length read once (one query scores many postings against the same index);
        with `joint`, the average length of both indexes."""
        lengths, k1, b = self._lengths, self.k1, self.b
        n = len(lengths) + (len(joint._lengths) if joint is not None else 0)
        total = self._total + (joint._total if joint is not None else 0)
        avg = (total / n if n else 0.0) or 1.0
        base, per_length, top = k1 * (1 - b), k1 * b / avg, k1 + 1

        def saturated(tf: int, key: str) -> float:
            return tf * top / (tf + base + per_length * lengths[key])

        return saturated

    def query(self, text: str, k: int, allowed: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        return self.search(tokenize(text), k, allowed)


def reciprocal_rank_fusion(rankings: list[list[str]], k: int, *, constant: int = 60) -> list[tuple[str, float]]:
    """Fuse ranked id lists (Cormack et al. 2009: score = sum 1/(60 + rank))."""
    scores: dict[str, float] = defaultdict(float)
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] += 1.0 / (constant + rank)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]

"""The keyword half of similarity: a BM25 index over an agent's active traces, scored in [0, 1].

Why a lexical match at all (the issue defines similarity as the embedding cosine): people ask about
their memories with the memories' own rare words — a name, a place, a hobby, "LGBTQ", "pottery".
A small sentence embedder (MiniLM) spreads such a word's weight over the whole sentence and ranks a
trace that merely talks about something similar as high as the one that names it; BM25 ranks by
exactly those rare shared words (on LoCoMo, BM25 over raw turns beats MiniLM over the same turns by
16 points of recall@10). The two make different mistakes, so `engram.memory.cognitive.retrieval` fuses
them (`memory.retrieval.similarity`: "hybrid", the default; "embedding" keeps the literal cosine).

The lexical match of a trace for a query is its BM25 score divided by the sum of the idf of the
query's terms the index knows:

    lexical(q, t) = min(1, BM25(q, t) / Σ_{w ∈ q} idf(w))

With BM25's saturation (k1 = 1.2, b = 0.75), a trace of average length holding each query term once
scores exactly Σ idf, so it gets 1; a trace holding only the query's rarest word gets that word's
share of the query's information. The scale is absolute like the cosine's — it does not depend on
which other traces matched — so a lexical match of 0.3 means the same thing for every query, and the
fused similarity stays a factor in [0, 1] that the composite's weights can rely on.

The index is maintained by the same fold that maintains the HNSW index (`engram.memory.cognitive.memory`)
and rebuilt by replay; it holds the same text the embedding is made of.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from engram.providers.search.bm25 import BM25, tokenize


class LexicalIndex:
    def __init__(self) -> None:
        self.bm25 = BM25()

    def __len__(self) -> int:
        return len(self.bm25)

    def __contains__(self, key: str) -> bool:
        return key in self.bm25

    def add(self, key: str, text: str) -> None:
        self.bm25.add(key, text)

    def remove(self, key: str) -> None:
        self.bm25.remove(key)

    @staticmethod
    def terms(query: str) -> list[str]:
        return tokenize(query)

    def information(self, terms: list[str]) -> float:
        """Σ idf of the distinct query terms the index knows: the score of a perfect average-length match."""
        return sum(self.bm25.idf(t) for t in sorted(set(terms)))

    def search(self, terms: list[str], k: int, allowed: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        """The `k` best lexical matches (id, lexical match in [0, 1]), best first, ties by id."""
        total = self.information(terms)
        if total <= 0 or k <= 0:
            return []
        return [(key, min(1.0, s / total)) for key, s in self.bm25.search(terms, k, allowed)]

    def match(self, terms: list[str], keys: Iterable[str], joint: "LexicalIndex | None" = None) -> dict[str, float]:
        """The lexical match in [0, 1] of each of `keys` (0 when it shares no term with the query). `joint`: on the
        statistics of this index and `joint` as one collection (a dormant trace scored on the scale of active ones)."""
        keys = list(keys)
        other = joint.bm25 if joint is not None else None
        total = sum(self.bm25.joint_idf(t, other) for t in sorted(set(terms)))
        if total <= 0:
            return {k: 0.0 for k in keys}
        return {k: min(1.0, s / total) for k, s in self.bm25.scores(terms, keys, joint=other).items()}

    # -- query focus and feedback (engram.memory.cognitive.retrieval, steps 1 and 3) --------------------------------

    def focus(self, query: str, common_share: float) -> str:
        """`query` without the words most of the agent's memories hold, for the embedding of the query.

        A word that more than `common_share` of the indexed traces contain (the names of the people the
        agent always talks with, its everyday words) tells the embedding nothing about which memory is
        meant, yet a small sentence embedder gives it as much weight as the rare words that do: "What
        does Ana's brother collect?" lands near every memory about Ana. BM25 already discounts such
        words by their idf; the focused text lets the cosine do the same. Words without index terms
        (stop words) are kept, so the question keeps its form; when every content word is common, the
        query is returned unchanged. The statistics are the agent's own, so what counts as common
        follows each agent's memories, not a fixed list.
        """
        if len(self.bm25) == 0 or common_share >= 1.0:
            return query
        kept, dropped = [], False
        for word in _WORD.findall(query):
            terms = tokenize(word)
            if terms and all(self.bm25.document_share(t) > common_share for t in terms):
                dropped = True
                continue
            kept.append(word)
        if not dropped or not any(tokenize(w) for w in kept):
            return query
        return " ".join(kept) + ("?" if query.rstrip().endswith("?") else "")

    def expansion(self, keys: list[str], exclude: Iterable[str], n: int) -> list[str]:
        """The `n` terms that best characterise the traces `keys` (pseudo-relevance feedback): each term's
        weight is Σ over the traces of its share of the trace's terms × its idf; `exclude` (the query's
        own terms) is left out. Ties by term."""
        if n <= 0:
            return []
        skip = set(exclude)
        weight: dict[str, float] = {}
        bm = self.bm25
        for key in keys:
            length = bm.length(key)
            if not length:
                continue
            for term in bm.terms_of(key):
                if term not in skip:
                    weight[term] = weight.get(term, 0.0) + bm.term_frequency(term, key) / length * bm.idf(term)
        return [t for t, _ in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]

    def weighted_information(self, weights: dict[str, float]) -> float:
        return sum(w * self.bm25.idf(t) for t, w in sorted(weights.items()))

    def search_weighted(self, weights: dict[str, float], k: int, allowed: Callable[[str], bool] | None = None) -> list[tuple[str, float]]:
        """`search` for a weighted query (term → weight), on the same absolute scale: BM25 / Σ weight · idf."""
        total = self.weighted_information(weights)
        if total <= 0 or k <= 0:
            return []
        return [(key, min(1.0, s / total)) for key, s in self.bm25.search(list(weights), k, allowed, weights=weights)]

    def match_weighted(self, weights: dict[str, float], keys: Iterable[str], joint: "LexicalIndex | None" = None) -> dict[str, float]:
        keys = list(keys)
        other = joint.bm25 if joint is not None else None
        total = sum(w * self.bm25.joint_idf(t, other) for t, w in sorted(weights.items()))
        if total <= 0:
            return {k: 0.0 for k in keys}
        return {k: min(1.0, s / total) for k, s in self.bm25.scores(list(weights), keys, weights=weights, joint=other).items()}


_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")

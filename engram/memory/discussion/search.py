"""`VectorMemorySearch`: keywords separated by `;`, OR logic, at most 60 of them, `limit` results.

Modes:
- `keyword`: BM25 over each memory's title, summary, entities, key phrases and topics. A keyword
  of several words matches any of its words (OR, like the keywords themselves).
- `semantic`: cosine similarity of the query embedding to the memory embeddings (HNSW). The
  query text is the keywords with `;` read as spaces (as WilmerAI does for `semanticQuery`).
- `hybrid` (the default): both rankings fused by reciprocal rank fusion.

More than 60 keywords: the first 60 are used and the result carries a warning naming how many
were ignored (WilmerAI's documented behaviour: "any additional keywords will be ignored").

An empty result always says why: the discussion has no memories yet, or none matched.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from engram.config import defaults as d
from engram.memory.discussion.vectors import VectorMemoryRow, VectorStore
from engram.providers.search.bm25 import reciprocal_rank_fusion, tokenize

MODES = ("keyword", "semantic", "hybrid")
DEFAULT_MODE = "hybrid"
# How deep each ranking goes before fusion: enough that a memory ranked well by one side only
# still reaches the top `limit` (RRF rewards agreement, so it needs both lists' tails).
FUSION_DEPTH = 50
# The node's output: summaries separated as WilmerAI separates them.
RESULT_SEPARATOR = "\n\n---\n\n"
NO_MATCH = "No relevant memories found in the vector database for the given keywords."
NO_DISCUSSION = "Cannot perform VectorMemorySearch without a discussionId."

Embed = Callable[[list[str]], np.ndarray]


class SearchError(ValueError):
    """A search that cannot run as asked (no keywords, unknown mode, bad limit)."""


@dataclass(frozen=True)
class Hit:
    memory: VectorMemoryRow
    score: float  # BM25 score, cosine similarity or RRF score, by mode
    rank: int
    keyword_rank: int | None = None
    semantic_rank: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "score": round(self.score, 6),
            "keyword_rank": self.keyword_rank,
            "semantic_rank": self.semantic_rank,
            **self.memory.as_dict(),
        }


@dataclass
class SearchResult:
    discussion: str
    mode: str
    keywords: list[str]
    limit: int
    hits: list[Hit] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reason: str | None = None  # why there are no hits

    def output(self) -> str:
        """What the node hands to later nodes: the memory summaries, or why there are none."""
        if not self.hits:
            return self.reason or NO_MATCH
        return RESULT_SEPARATOR.join(h.memory.summary for h in self.hits)

    def as_dict(self) -> dict[str, Any]:
        return {
            "discussion": self.discussion,
            "mode": self.mode,
            "keywords": self.keywords,
            "limit": self.limit,
            "warnings": self.warnings,
            "reason": self.reason,
            "hits": [h.as_dict() for h in self.hits],
        }


def parse_keywords(text: str, max_keywords: int = d.VECTOR_SEARCH_MAX_KEYWORDS) -> tuple[list[str], list[str]]:
    """Keywords from `a;b;c` (trimmed, empties and repeats dropped), and warnings."""
    seen: set[str] = set()
    keywords = []
    for part in (text or "").split(";"):
        kw = " ".join(part.split())
        if kw and kw.lower() not in seen:
            seen.add(kw.lower())
            keywords.append(kw)
    warnings = []
    if len(keywords) > max_keywords:
        ignored = len(keywords) - max_keywords
        warnings.append(
            f"{len(keywords)} keywords given; VectorMemorySearch uses at most {max_keywords}, "
            f"so the last {ignored} were ignored"
        )
        keywords = keywords[:max_keywords]
    return keywords, warnings


def check_mode(mode: str) -> str:
    if mode not in MODES:
        close = difflib.get_close_matches(mode, MODES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise SearchError(f"unknown search mode {mode!r}{hint} (modes: {', '.join(MODES)})")
    return mode


def search(
    store: VectorStore | None,
    text: str,
    *,
    discussion: str,
    limit: int = d.VECTOR_SEARCH_LIMIT,
    mode: str = DEFAULT_MODE,
    embed: Embed | None = None,
    embedding_model: str | None = None,
) -> SearchResult:
    """Run one VectorMemorySearch over an opened store (None: the store does not exist yet).

    `embed`/`embedding_model`: the query embedder, needed by the semantic and hybrid modes. When it
    is missing or its model differs from the store's, those modes fall back to keyword search
    with a warning (vectors of two models are not comparable).
    """
    check_mode(mode)
    if limit < 1:
        raise SearchError(f"limit must be at least 1, got {limit}")
    keywords, warnings = parse_keywords(text)
    if not keywords:
        raise SearchError("no keywords: give them separated by ';', e.g. \"Project Stardust;mission parameters\"")
    result = SearchResult(discussion=discussion, mode=mode, keywords=keywords, limit=limit, warnings=warnings)
    if store is None or len(store) == 0:
        result.reason = (
            f"No memories have been stored for discussion {discussion!r} yet: its vector memory store "
            + ("does not exist yet (it is created at the first memory check, around message 3)." if store is None
               else "is empty (not enough messages have accumulated for a first memory).")
        )
        return result
    if mode != "keyword" and (embed is None or (embedding_model and embedding_model != store.embedding_model)):
        why = (
            "no embedder is available" if embed is None
            else f"the store was embedded with {store.embedding_model!r}, this process embeds with {embedding_model!r}"
        )
        warnings.append(f"{mode} search fell back to keyword search: {why}")
        mode = "keyword"
    depth = min(len(store), max(limit, FUSION_DEPTH)) if mode == "hybrid" else min(len(store), limit)
    kw_ranked: list[tuple[str, float]] = []
    sem_ranked: list[tuple[str, float]] = []
    if mode in ("keyword", "hybrid"):
        terms = [t for kw in keywords for t in tokenize(kw)]
        kw_ranked = store.keywords.search(terms, depth)
    if mode in ("semantic", "hybrid"):
        query = " ".join(keywords)
        vector = np.asarray(embed([query]), dtype=np.float32)[0]  # type: ignore[misc]
        sem_ranked = store.hnsw.search(vector, depth) if store.hnsw is not None else []
    kw_pos = {k: i + 1 for i, (k, _) in enumerate(kw_ranked)}
    sem_pos = {k: i + 1 for i, (k, _) in enumerate(sem_ranked)}
    if mode == "keyword":
        ranked = kw_ranked
    elif mode == "semantic":
        ranked = sem_ranked
    else:
        ranked = reciprocal_rank_fusion([[k for k, _ in kw_ranked], [k for k, _ in sem_ranked]], limit)
        if not kw_ranked:
            warnings.append("no memory contains any of the keywords; these results are ranked by meaning only")
    result.mode = mode
    result.hits = [
        Hit(store.by_id[k], float(score), rank, kw_pos.get(k), sem_pos.get(k))
        for rank, (k, score) in enumerate(ranked[:limit], start=1)
    ]
    if not result.hits:
        result.reason = NO_MATCH
    return result

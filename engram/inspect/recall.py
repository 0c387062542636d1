"""View 4, a recall explained: the ranked traces with the six factors of their composite score (each
factor's weighted contribution, stacked), how each became a candidate, and the steps of HyDE.

HyDE searches near a hypothetical memory (averaged with the query) with a threshold lowered step by step
until something clears it (`engram.memory.cognitive.hyde`): every threshold tried before the last found nothing, the last found
`hits`. The recall is a look: the reader does not record it, so it reinforces nothing.
"""

from __future__ import annotations

from engram.inspect.source import MemoryReader, RecallUnavailable

FACTORS = ("similarity", "activation", "strength", "recency", "emotional", "importance")


def recall_view(reader: MemoryReader, agent: str, query: str, *, discussion: str | None = None,
                limit: int | None = None, hyde: bool | None = True) -> dict:
    if not query.strip():
        raise ValueError("the query is empty")
    try:
        result = reader.recall(agent, query, discussion=discussion, limit=limit, hyde=hyde)
    except RecallUnavailable as exc:
        return {"agent": agent, "query": query, "discussion": discussion, "unavailable": str(exc)}
    steps = []
    h = result.get("hyde")
    if h is not None:
        tried = list(h.get("tried") or [])
        hits = h.get("hits") or []
        for i, threshold in enumerate(tried):
            last = i == len(tried) - 1
            steps.append({"threshold": threshold, "hits": len(hits) if last else 0,
                          "kept": bool(hits) and last})
    return {**result, "factor_order": list(FACTORS), "hyde_steps": steps}


def default_queries(reader: MemoryReader, agent: str, discussion: str | None) -> list[str]:
    """What to explain when nobody asked: the discussion's latest user message (as `engram context` recalls for)."""
    if discussion is None:
        return []
    _, rows = reader.sql(
        "SELECT content FROM messages WHERE agent = ? AND discussion_id = ? AND role = 'user' ORDER BY seq DESC LIMIT 1",
        [agent, discussion],
    )
    text = " ".join((rows[0][0] if rows else "").split())
    return [text[:300]] if text else []

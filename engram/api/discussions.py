"""Discussion memory (WilmerAI) and infinite context: search, chunk memories, rolling summary,
compactions, and the context that would be sent to the model now."""

from __future__ import annotations

import time
from typing import Any, Callable

import msgspec

from engram.api.core import ApiCore
from engram.api import types as t
from engram.api.errors import check_count, error
from engram.memory.discussion.lines import ChunkMemory, RollingSummary


class DiscussionOps(ApiCore):
    def discussion(self, discussion: str) -> t.DiscussionResponse:
        """The agent a discussion belongs to (the one agent with a discussion of that id; `Api.discussion_agent`)."""
        return t.DiscussionResponse(discussion=discussion, agent=self.discussion_agent(discussion))

    def search(self, agent: str, discussion: str, req: t.SearchRequest) -> t.SearchResponse:
        """VectorMemorySearch over `<id>_vector_memory.db` (keyword, semantic or hybrid)."""
        from engram.memory.discussion import search as vsearch

        self.discussion_agent(discussion, agent)
        files = self.files(agent)
        started = time.perf_counter()
        admits = self._search_filter(agent, discussion, req)
        try:
            result = vsearch.search(
                files.open_store(discussion), req.keywords, discussion=discussion,
                limit=req.limit if admits is None else t.MAX_RESULTS, mode=req.mode,
                embed=files.embed, embedding_model=None if req.mode == "keyword" else files.embedding_model,
            )
        except vsearch.SearchError as exc:
            raise error("bad_query", str(exc)) from None
        ms = (time.perf_counter() - started) * 1000
        d = result.as_dict()
        if admits is not None:  # ranked among those that pass: the whole ranking (a discussion's store), then the cut
            d["hits"] = [dict(h, rank=i + 1) for i, h in enumerate(h for h in d["hits"] if admits(h))][: req.limit]
            d["limit"] = req.limit
        return t.SearchResponse(discussion=discussion, agent=agent, mode=d["mode"], keywords=d["keywords"],
                                limit=d["limit"], warnings=d["warnings"], reason=d["reason"], hits=d["hits"],
                                ms=round(ms, 2))

    def _search_filter(self, agent: str, discussion: str, req: t.SearchRequest) -> Callable[[dict[str, Any]], bool] | None:
        """What a search hit must pass (None: no filter): its messages' time overlaps [since, until), its metadata
        holds every pair asked for."""
        import json

        from engram.events.envelope import to_us

        if req.since is None and req.until is None and not req.metadata:
            return None
        since = to_us(req.since) if req.since is not None else None
        until = to_us(req.until) if req.until is not None else None
        if since is not None and until is not None and until <= since:
            raise error("invalid_request", "`until` must be later than `since`")
        labelled = None
        if req.metadata:
            _, rows = self.sql_rows("SELECT memory_id, metadata FROM vector_memories WHERE agent = ? AND discussion_id = ? "
                                    "AND metadata IS NOT NULL", [agent, discussion])
            wanted = req.metadata.items()
            labelled = {mid for mid, raw in rows if all(json.loads(raw).get(k) == v for k, v in wanted)}

        def admits(hit: dict[str, Any]) -> bool:
            from datetime import datetime

            first = to_us(datetime.fromisoformat(hit["first_ts"].replace("Z", "+00:00")))
            last = to_us(datetime.fromisoformat(hit["last_ts"].replace("Z", "+00:00")))
            return ((since is None or last >= since) and (until is None or first < until)
                    and (labelled is None or hit["memory_id"] in labelled))

        return admits

    def memories(self, agent: str, discussion: str, last: int | None = None) -> t.MemoriesResponse:
        """The chunk memories of `<id>_memories.jsonl`, oldest first (the last `last` of them)."""
        from engram.memory.discussion.files import MEMORIES_SUFFIX, read_memories

        self.discussion_agent(discussion, agent)
        check_count("last", last, t.MAX_ROWS)
        path = self.files(agent).path(discussion, MEMORIES_SUFFIX)
        records = read_memories(path)
        shown = (records or [])[-last:] if last else (records or [])
        return t.MemoriesResponse(discussion=discussion, agent=agent, path=str(path), exists=records is not None,
                                  total=len(records or []), memories=msgspec.convert(shown, list[ChunkMemory]))

    def summary(self, agent: str, discussion: str) -> t.SummaryResponse:
        """The rolling summary of `<id>_summary.jsonl` (None before the first one)."""
        from engram.memory.discussion.files import SUMMARY_SUFFIX, read_summary

        self.discussion_agent(discussion, agent)
        path = self.files(agent).path(discussion, SUMMARY_SUFFIX)
        record = read_summary(path)
        return t.SummaryResponse(discussion=discussion, agent=agent, path=str(path),
                                 summary=None if record is None else msgspec.convert(record, RollingSummary))

    def compactions(self, agent: str, discussion: str) -> t.CompactionsResponse:
        """Every compaction of the discussion (as its transparencyLevel kept it) and the chain now, with the
        text of what was dropped (dropped content is never lost: it is in the log)."""
        from engram.memory.context.history import chain_tree, compaction_history, current_chain

        self.discussion_agent(discussion, agent)
        history = compaction_history(self.sql_rows, agent, discussion)
        ids = sorted({d for c in history for d in c.dropped})
        dropped: dict[str, str] = {}
        if ids:
            _, rows = self.sql_rows("SELECT message_id, content FROM messages WHERE agent = ? AND discussion_id = ? "
                                    "AND message_id IN (SELECT unnest(?))", [agent, discussion, ids])
            dropped = dict(rows)
        out = []
        for c in history:
            d = c.as_dict()
            d["dropped_content"] = [{"id": x, "text": dropped.get(x)} for x in c.dropped]
            out.append(d)
        chain = current_chain(history)
        tokens = sum(c.output_tokens for c in chain)
        covered = sum(c.covered_tokens for c in chain)
        figures = {
            "nodes": [c.node_id for c in chain], "tokens": tokens, "covered_tokens": covered,
            "first_turn": chain[0].first_turn if chain else None, "last_turn": chain[-1].last_turn if chain else None,
            "compression_ratio": round(covered / tokens, 2) if tokens else 0.0,
        }
        return t.CompactionsResponse(discussion=discussion, agent=agent, compactions=out, chain=figures,
                                     tree=chain_tree(history))

    def context(self, agent: str, discussion: str, *, query: str | None = None, recall: bool = True) -> t.ContextResponse:
        """What would be sent to the model for `discussion` now: working memory, rolling summary, the
        compaction chain, recalled memories (for `query`, default the latest user message), recent turns."""
        from engram.memory.context.history import build_context
        from engram.config.home import ProjectionPaths

        self.discussion_agent(discussion, agent)
        recaller = (lambda q: self.recalled(agent, discussion, q)) if recall else None
        assembled = build_context(self.sql_rows, self.home, ProjectionPaths(self.home.projections_dir), agent,
                                  discussion, recall=recaller, query=query)
        return t.ContextResponse(discussion=discussion, agent=agent, context=assembled.as_json(),
                                 rendered=assembled.render())

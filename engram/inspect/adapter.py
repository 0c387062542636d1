"""The inspector's one adapter: `MemoryReader` over what engram offers today.

- `EngramReader(mem)`: over the API — `engram.Client` (the home's server, over HTTP), `engram.Engram`
  (embedded) or the server's own `engram.api.service.Api` (the page the server serves at `/inspect`):
  SQL through it, recall through the trace readers (not recorded: `record=False`).
- `HomeFilesReader(config)`: over the files of a home nobody serves: SQL in a read-only session over
  the DuckDB files; nothing starts, so there is no recall.

Both read the projection files (the WilmerAI files, working-memory.md) and the agent's configuration
from the home. This module is the only one of `engram.inspect` that knows where data comes from:
moving the inspector onto another API is a change of this file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import duckdb

from engram.config.agent import AgentConfig
from engram.config.home import Home, ProjectionPaths
from engram.config.loader import load_or_default
from engram.config.service import ServiceConfig
from engram.inspect.source import DiscussionFiles, RecallUnavailable
from engram.kernel.ids import validate_agent, validate_discussion
from engram.memory.discussion.files import MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX, read_memories, read_summary

# Columns of `<id>_vector_memory.db`'s `memories` table the page shows (embeddings stay in the file).
_VECTOR_COLUMNS = (
    "memory_id", "ordinal", "generation", "title", "summary", "entities", "key_phrases", "topics", "sentiment",
    "first_seq", "last_seq", "message_ids", "message_count", "token_count", "mode", "trigger", "llm_provider",
    "llm_model",
)


class _HomeFiles:
    """What both readers read straight from the home's files."""

    def __init__(self, config: ServiceConfig):
        self.config = config
        self.home = Home(config.home, config.shards)
        self.paths = ProjectionPaths(self.home.projections_dir)

    def sql(self, query: str, params: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        raise NotImplementedError  # each reader reads its own way

    def discussion_files(self, agent: str, discussion: str) -> DiscussionFiles:
        validate_agent(agent)
        validate_discussion(discussion)
        path = {s: self.paths.discussion_file(agent, discussion, s) for s in (MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX)}
        return DiscussionFiles(
            memories=read_memories(path[MEMORIES_SUFFIX]),
            summary=read_summary(path[SUMMARY_SUFFIX]),
            vector_memories=_vector_rows(path[VECTOR_SUFFIX]),
            paths={s: str(p) for s, p in path.items()},
        )

    def working_memory_file(self, agent: str) -> str:

        path = self.paths.working_memory_file(agent)
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def agent_config(self, agent: str) -> AgentConfig:
        return load_or_default(AgentConfig, self.home.agent_config_path(agent))

    def _context(self, agent: str, discussion: str, recall) -> dict:
        """`build_context` over this reader's SQL (each reader defines `sql`)."""
        from engram.memory.context.history import build_context

        return build_context(
            lambda q, params: self.sql(q, params), self.home, self.paths, validate_agent(agent),
            validate_discussion(discussion), recall=recall,
        ).as_json()


def _vector_rows(path: Path) -> list[dict] | None:
    """The rows of a vector memory store (written whole and renamed into place, so a read-only open is safe)."""
    if not path.exists():
        return None
    con = duckdb.connect(str(path), read_only=True)
    try:
        rows = con.execute(f"SELECT {', '.join(_VECTOR_COLUMNS)} FROM memories ORDER BY ordinal").fetchall()
    finally:
        con.close()
    return [dict(zip(_VECTOR_COLUMNS, r)) for r in rows]


class EngramReader(_HomeFiles):
    """Over the API: everything, recall included. `mem`: an `engram.Client`, an embedded `engram.Engram`, or the
    `Api` a server holds."""

    def __init__(self, mem, config: ServiceConfig | None = None):
        if config is None:
            config = getattr(mem, "config", None)
        if config is None:
            from engram.config.service import load_service_config

            config = load_service_config(mem.server_info().home)
        super().__init__(config)
        self.mem = mem

    def sql(self, query: str, params: Sequence[Any] = ()) -> tuple[list[str], list[tuple]]:
        if hasattr(self.mem, "read_sql"):  # in this process (embedded, or the server's Api): the runtime's query
            return self.mem.read_sql(query, list(params))
        res = self.mem.sql(query, list(params))
        return res.columns, [tuple(r) for r in res.rows]

    def recall(self, agent: str, query: str, *, discussion: str | None = None, limit: int | None = None,
               hyde: bool | None = None) -> dict:
        import msgspec

        from engram.api.types import RecallRequest

        if hasattr(self.mem, "read_sql"):  # in this process: the API's typed call
            result = self.mem.recall(agent, RecallRequest(query=query, discussion=discussion, limit=limit, hyde=hyde,
                                                          record=False))
        else:
            result = self.mem.recall(agent, query, discussion=discussion, limit=limit, hyde=hyde, record=False)
        out = msgspec.to_builtins(result)
        for h in out["hits"]:
            h.pop("source_seqs", None)
        if out.get("hyde") is not None:
            out["hyde"]["hits"] = out["hyde"].pop("matches")
        out["now"] = out.pop("now_us")
        return out

    def context(self, agent: str, discussion: str) -> dict:
        from engram.memory.context.assemble import Recalled

        def recall(query: str) -> list[Recalled]:
            hits = self.recall(agent, query, discussion=discussion)["hits"]
            return [Recalled(h["score"], h["content"], h["trace_id"], tuple(s["seq"] for s in h["sources"])) for h in hits]

        return self._context(agent, discussion, recall)


class HomeFilesReader(_HomeFiles):
    """Over the files of a home that nothing serves: SQL and files; no recall (it needs the trace readers)."""

    def __init__(self, config: ServiceConfig):
        super().__init__(config)
        from engram.sql import views as sqlviews

        self.con = sqlviews.open_readonly({s: self.home.log_path(s) for s in range(config.shards)}, self.paths)

    def sql(self, query: str, params: Sequence[Any] = ()) -> tuple[list[str], list[tuple]]:
        res = self.con.execute(query, list(params))
        return [d[0] for d in res.description] if res.description else [], res.fetchall()

    def recall(self, agent: str, query: str, *, discussion: str | None = None, limit: int | None = None,
               hyde: bool | None = None) -> dict:
        raise RecallUnavailable("recall needs a running engram (this reader reads the home's files only)")

    def context(self, agent: str, discussion: str) -> dict:
        return self._context(agent, discussion, None)

    def close(self) -> None:
        self.con.close()

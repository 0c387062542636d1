"""Discussion memory for the workflow engine and the CLI, over a running engram.

- `EngramMemory`: over the Python API (`engram.client.Engram`) and its Ray actors: a creator
  node drains the discussion's Summarizer (the pool member that owns it) and waits for the
  projections; readers read the files.
- `LocalEngine` + `LocalMemory`: the same parts (the shard's log and projections, the
  Summarizer policy) hosted in one process without Ray, driven synchronously: for embedding
  engram in a single process, tests of the workflow engine, and benchmarks of the pure path.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path

from engram.actors.pool import owner
from engram.discussion.files import MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX, read_memories, read_summary
from engram.discussion.vectors import VectorStore
from engram.events.discussion import SummaryUpdateRequested
from engram.events.envelope import NewEvent, Write
from engram.embeddings.factory import single_threaded
from engram.home import Home, ProjectionPaths
from engram.ids import validate_agent, validate_discussion

SUMMARIZER_GROUP = "summarizer"


def now_us() -> int:
    return int(time.time() * 1_000_000)


class MemoryFiles:
    """Fast reads of one agent's discussion files, and the query embedder (loaded on first use)."""

    def __init__(self, paths: ProjectionPaths, agent: str, embedder_config=None):
        self.paths = paths
        self.agent = validate_agent(agent)
        self._embedder_config = embedder_config
        self._embedder = None
        self._stores: dict[str, tuple[tuple[float, int], VectorStore]] = {}

    # --------------------------------------------------------------- files

    def path(self, discussion: str, suffix: str) -> Path:
        return self.paths.discussion_file(self.agent, discussion, suffix)

    def open_store(self, discussion: str) -> VectorStore | None:
        """The vector store of `discussion` (None if it does not exist), reopened only when the file changed."""
        path = self.path(discussion, VECTOR_SUFFIX)
        try:
            st = path.stat()
        except FileNotFoundError:
            self._stores.pop(discussion, None)
            return None
        key = (st.st_mtime, st.st_ino)
        cached = self._stores.get(discussion)
        if cached is None or cached[0] != key:
            cached = (key, VectorStore.open(path))
            self._stores[discussion] = cached
        return cached[1]

    def missing_files(self, discussion: str, expected: dict[str, bool]) -> list[Path]:
        """Files the projections say exist (`expected`: suffix -> exists) but that are not on disk."""
        return [self.path(discussion, s) for s, should in expected.items() if should and not self.path(discussion, s).exists()]

    def counts(self, discussion: str) -> dict[str, int]:
        store = self.open_store(discussion)
        summary = read_summary(self.path(discussion, SUMMARY_SUFFIX))
        return {
            "memories": len(read_memories(self.path(discussion, MEMORIES_SUFFIX)) or []),
            "vector_memories": len(store) if store is not None else 0,
            "absorbed": summary["memories_absorbed"] if summary else 0,
        }

    # --------------------------------------------------------------- query embeddings

    def _load_embedder(self):
        if self._embedder is None:
            from engram.embeddings.factory import make_embedder

            self._embedder = make_embedder(single_threaded(self._embedder_config))
        return self._embedder

    def embed(self, texts: list[str]):
        return self._load_embedder().embed(texts)

    @property
    def embedding_model(self) -> str:
        return self._load_embedder().name


def describe_change(before: dict[str, int], after: dict[str, int]) -> str:
    parts = [
        f"{after['memories'] - before['memories']} new chunk memor{'y' if after['memories'] - before['memories'] == 1 else 'ies'} ({after['memories']} in all)",
        f"{after['vector_memories'] - before['vector_memories']} new vector memor{'y' if after['vector_memories'] - before['vector_memories'] == 1 else 'ies'} ({after['vector_memories']} in all)",
    ]
    if after["absorbed"] != before["absorbed"]:
        parts.append(f"rolling summary now covers {after['absorbed']} chunk memories")
    return "; ".join(parts)


EXPECTED_SQL = """
SELECT
  coalesce((SELECT any_value(created) FROM discussion_memory_files WHERE discussion_id = $1), false),
  coalesce((SELECT count(*) > 0 FROM discussion_summaries WHERE discussion_id = $1), false),
  coalesce((SELECT any_value(created) FROM vector_memory_stores WHERE discussion_id = $1), false)
"""


def expected_files(row) -> dict[str, bool]:
    return dict(zip((MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX), (bool(x) for x in row)))


def summary_request(node: str, *, min_memories_per_summary: int, loop_if_memories_exceed: int,
                    system_prompt: str | None = None, prompt: str | None = None,
                    max_response_size_in_tokens: int | None = None, endpoint_name: str | None = None,
                    preset: str | None = None) -> SummaryUpdateRequested:
    return SummaryUpdateRequested(
        node=node, min_memories_per_summary=min_memories_per_summary, loop_if_memories_exceed=loop_if_memories_exceed,
        system_prompt=system_prompt, prompt=prompt, max_response_size_in_tokens=max_response_size_in_tokens,
        endpoint_name=endpoint_name, preset=preset,
    )


def _request_id() -> str:
    import uuid

    return f"summary-request:{uuid.uuid4().hex}"


class CreatorMemory(MemoryFiles, ABC):
    """What memory creator nodes do, over a host that runs the Summarizer (Ray actors, or this process)."""


    def ensure_memories(self, discussion: str) -> str:
        before = self.counts(discussion)
        regenerated = self.regenerate_if_deleted(discussion)
        failed = self.settle(discussion)
        return failed + regenerated + self.heal(discussion) + describe_change(before, self.counts(discussion))

    def request_summary(self, discussion: str, node: str, **params) -> str:
        before = self.counts(discussion)
        regenerated = self.regenerate_if_deleted(discussion)
        event = summary_request(node, **params)
        self.append([Write(validate_discussion(discussion), self.agent, (NewEvent(event, now_us(), _request_id()),))])
        failed = self.settle(discussion)
        return failed + regenerated + self.heal(discussion) + describe_change(before, self.counts(discussion))

    def regenerate_if_deleted(self, discussion: str) -> str:
        """The guide's way to regenerate: every file of the discussion deleted from Public/ (while engram ran, or
        found so at start) means a new generation from the full history, under the settings in force now."""
        from engram.discussion.regenerate import DELETED_MARKER, HISTORY_TYPES, Generation, regeneration_wanted

        marker = self.path(discussion, "").with_name(DELETED_MARKER.format(discussion=discussion))
        files = {s: self.path(discussion, s) for s in (MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX)}
        rows = self.sql(EXPECTED_SQL, [discussion])
        if not rows or not regeneration_wanted(files, expected_files(rows[0]), marker):
            return ""
        self.sync_settings()
        history = self.read_stream(discussion, HISTORY_TYPES)
        generation = Generation(self.agent, discussion, history, reason="memory files deleted", ts_us=now_us())
        self.append([generation.write])
        marker.unlink(missing_ok=True)
        return (f"the memory files were deleted: generation {generation.number} regenerated from the full history "
                f"with the settings in force; ")

    def heal(self, discussion: str) -> str:
        """Some (not all) files deleted by hand come back from the log (no LLM call) when a creator node runs."""
        from engram.discussion.rebuild import rebuild_discussion

        rows = self.sql(EXPECTED_SQL, [discussion])
        missing = self.missing_files(discussion, expected_files(rows[0])) if rows else []
        if not missing:
            return ""
        records = self.read_stream(discussion, None)
        rebuild_discussion(records, self.paths, self.agent, discussion, only_missing=True)
        return f"restored from the log: {', '.join(p.name for p in missing)}; "

    # What a host provides: SQL over the projections, the discussion's events, appending, settling, settings.
    @abstractmethod
    def sql(self, query: str, params: list) -> list[tuple]: ...

    @abstractmethod
    def read_stream(self, discussion: str, types) -> list: ...

    @abstractmethod
    def append(self, writes: list[Write]) -> None: ...

    @abstractmethod
    def settle(self, discussion: str) -> str:
        """Let the discussion's Summarizer and the projections catch up; a line about a failure, else ""."""

    @abstractmethod
    def sync_settings(self) -> None: ...



class EngramMemory(CreatorMemory):
    """Memory nodes over a running engram (`Engram` client, Ray actors)."""

    def __init__(self, mem, agent: str):
        super().__init__(ProjectionPaths(Home(mem.config.home, mem.config.shards).projections_dir), agent,
                         mem.config.embedder)
        self.mem = mem

    def drain(self, discussion: str) -> str:
        """The Summarizer owning `discussion` has handled the whole log; projections show it.
        Returns a line about a failure of the Summarizer (empty when it succeeded)."""
        import ray

        from engram.policies.registry import members as pool_size

        members = pool_size(SUMMARIZER_GROUP, self.mem.config.ray.pools)
        shard = self.mem.shard_of(self.agent)
        handle = self.mem.runtime.policies()[(SUMMARIZER_GROUP, shard, owner(validate_discussion(discussion), members))]
        ray.get(handle.drain.remote())
        self.mem.wait_projections()
        error = ray.get(handle.status.remote())["errors"].get("summarizer")
        return f"the Summarizer failed and will retry: {error}; " if error else ""

    def settle(self, discussion: str) -> str:
        return self.drain(discussion)

    def sql(self, query: str, params: list) -> list[tuple]:
        return self.mem.sql(query, params)[1]

    def read_stream(self, discussion: str, types) -> list:
        return self.mem.read(self.agent, stream=discussion, limit=None, types=list(types) if types else None)

    def append(self, writes: list[Write]) -> None:
        self.mem.append(writes)

    def sync_settings(self) -> None:
        self.mem.sync_settings(self.agent, fresh=True)


class LocalEngine:
    """One shard of engram in this process, without Ray: log, projections and the Summarizer.

    Work is synchronous: `settle()` runs the Summarizer and the projections until neither has
    anything left to do.
    """

    def __init__(self, root: str | Path, config=None):
        from engram.config.service import load_service_config
        from engram.policies.base import PolicyContext
        from engram.policies.host import PolicyHost
        from engram.policies.summarizer import Summarizer
        from engram.services import build_services
        from engram.shard import ShardHost

        self.config = config or load_service_config(root)
        self.home = Home(self.config.home, 1)
        self.home.layout_check()
        self.services = build_services(self.config)
        self.shard = ShardHost(self.home.log_path(0), self.home.projections_dir, services=self.services, background=False)
        ctx = PolicyContext(shard=0, home=self.home, services=self.services, read=self.shard.read,
                            append=self.shard.append_many)
        self.summarizer = Summarizer(ctx)
        self.policies = PolicyHost([self.summarizer], read=self.shard.read, append=self.shard.append_many,
                                   head=self.shard.head, state_dir=None)
        self.paths = ProjectionPaths(self.home.projections_dir)

    def append(self, writes: list[Write]):
        return self.shard.append_many(writes)

    def sync_settings(self, agent: str, ts_us: int | None = None) -> int:
        from engram.settings import SettingsView, agent_stream, sync_writes

        view = SettingsView()
        for rec in self.shard.read(0, limit=None, stream=agent_stream(agent), types=["SettingsChanged"]):
            view.apply(rec)
        writes = sync_writes(self.home, agent, view.recorded_hashes(agent), ts_us or now_us(), self.config.llm)
        return sum(len(r.seqs) - r.duplicates for r in self.append(writes)) if writes else 0

    def settle(self) -> None:
        while True:
            handled = self.policies.run_until_caught_up()
            self.shard.catch_up()
            if handled == 0 and self.shard.projection_position() >= self.shard.head():
                return

    def close(self) -> None:
        if not getattr(self, "_closed", False):
            self._closed = True
            self.shard.close()
            embedder = self.services.get("embedder")
            if hasattr(embedder, "close"):
                embedder.close()  # the embedding cache file

    def __enter__(self) -> "LocalEngine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalMemory(CreatorMemory):
    """Memory nodes over a `LocalEngine`."""

    def __init__(self, engine: LocalEngine, agent: str):
        super().__init__(engine.paths, agent, engine.config.embedder)
        self.engine = engine

    def settle(self, discussion: str) -> str:
        self.engine.settle()
        return ""

    def sql(self, query: str, params: list) -> list[tuple]:
        return self.engine.shard.query(query, params)[1]

    def read_stream(self, discussion: str, types) -> list:
        return self.engine.shard.read(0, limit=None, stream=discussion, types=list(types) if types else None)

    def append(self, writes: list[Write]) -> None:
        self.engine.append(writes)

    def sync_settings(self) -> None:
        self.engine.sync_settings(self.agent)

"""`Api`: every operation a user has, as typed functions over one `Runtime`.

The CLI (through the HTTP server), `engram.Client`, REST and, later, MCP and the OpenAI-compatible
proxy all call these methods and nothing else. Each method takes plain arguments or a request type of
`engram.api.types` and returns a response type; every refusal is an `ApiError` (a stable code, an HTTP
status, a message saying what to fix) raised before anything is appended.

The operations are grouped by area in mixins (one module each); this class holds what they share:
the runtime, the clock (the API is a shell: it may read the wall clock, the domain never does), the
agents and discussions the log knows, and settings recording.
"""

from __future__ import annotations

import threading

from engram.api.admin import AdminOps
from engram.api.cognitive import CognitiveOps
from engram.api.completions import CompletionOps
from engram.api.discussions import DiscussionOps
from engram.api.clock import now_us
from engram.api.errors import error
from engram.api.jobs import Jobs
from engram.api.messages import MessageOps
from engram.api.runtime import MissingTable, Runtime
from engram.api.work import WorkOps
from engram.ids import validate_agent, validate_discussion


class Api(MessageOps, DiscussionOps, CognitiveOps, WorkOps, CompletionOps, AdminOps):
    def __init__(self, runtime: Runtime):
        self.rt = runtime
        self.config = runtime.config
        self.home = runtime.home
        self.jobs = Jobs()
        self._streams: dict[str, str] = {}  # stream -> agent, refreshed when a lookup misses
        self._streams_lock = threading.Lock()
        self._stream_writes: dict[str, int] = {}  # stream -> appends made through this API (note_streams)
        self._query_embedder = None
        self._files: dict[str, object] = {}  # agent -> MemoryFiles (caches open vector stores)

    # ------------------------------------------------------------------ what the log knows

    def refresh_streams(self) -> dict[str, str]:
        with self._streams_lock:
            self._streams = self.rt.streams()
            return self._streams

    def known_agents(self) -> set[str]:
        return set(self._streams.values()) or set(self.refresh_streams().values())

    def agent_exists(self, agent: str) -> bool:
        """An agent is known when the log has events of it, or its agent.config.json exists (`engram init`)."""
        if agent in self._streams.values():
            return True
        if agent in self.refresh_streams().values():
            return True
        return self.home.agent_config_path(agent).exists()

    def require_agent(self, agent: str) -> str:
        """A read of an agent the home does not know is refused (never recorded as a new agent)."""
        validate_agent(agent)
        if not self.agent_exists(agent):
            known = sorted(set(self._streams.values()))
            hint = f"; the agents are: {', '.join(known[:20])}" if known else "; the home has no agents yet"
            raise error("unknown_agent", f"agent {agent!r} has nothing in {self.home.root}{hint}")
        return agent

    def discussion_agent(self, discussion: str, agent: str | None = None) -> str:
        """The agent owning `discussion` (a stream belongs to exactly one agent), checked against `agent`."""
        validate_discussion(discussion)
        owner = self._streams.get(discussion) or self.refresh_streams().get(discussion)
        if owner is None:
            raise error("unknown_discussion", f"discussion {discussion!r} has no events in {self.home.root}"
                        + (f" (agent {agent!r})" if agent else ""))
        if agent is not None and validate_agent(agent) != owner:
            raise error("unknown_discussion", f"agent {agent!r} has no discussion {discussion!r} "
                        f"(it belongs to agent {owner!r})")
        return owner

    def note_streams(self, writes) -> None:
        """Streams just appended to are known without asking the runtime again, and their appends through this
        API are counted (`stream_writes`: what the proxy's tail record checks)."""
        with self._streams_lock:
            for w in writes:
                self._streams.setdefault(w.stream, w.agent)
                self._stream_writes[w.stream] = self._stream_writes.get(w.stream, 0) + 1

    def stream_writes(self, stream: str) -> int:
        """How many appends to `stream` this API has made (every write path calls `note_streams`)."""
        with self._streams_lock:
            return self._stream_writes.get(stream, 0)

    def forget_streams(self) -> None:
        with self._streams_lock:
            self._streams = {}

    # ------------------------------------------------------------------ shared helpers

    def sync_settings(self, agent: str, ts_us: int | None = None) -> int:
        return self.rt.sync_settings(agent, ts_us if ts_us is not None else now_us())

    def sql_rows(self, query: str, params: list | None = None) -> tuple[list[str], list[tuple]]:
        """SQL for a read model: a table no projection has written yet reads as no rows."""
        try:
            return self.rt.sql(query, params)
        except MissingTable:
            return [], []

    def query_embedder(self):
        """Query-time embedding in this process, one model shared by every reader (loaded on first use)."""
        if self._query_embedder is None:
            from engram.services import query_embedder

            self._query_embedder = query_embedder(self.config)
        return self._query_embedder

    def files(self, agent: str):
        from engram.discussion.memory_files import MemoryFiles
        from engram.home import ProjectionPaths

        files = self._files.get(agent)
        if files is None:
            files = self._files[agent] = MemoryFiles(ProjectionPaths(self.home.projections_dir), agent,
                                                     self.config.embedder, self.query_embedder())
        return files

    def close(self) -> None:
        self.wait_proxy_memory(timeout=120)  # memory creation the proxy started after its responses
        self.jobs.close()
        self.rt.close()

"""`ApiCore`: what every area of the API shares (`engram.api.service.Api` is the areas over it).

The runtime, the clock (the API is a shell: it may read the wall clock, the domain never does), the agents and
discussions the log knows, read-your-writes positions, settings recording, the query embedder and the memory files.
Each area (a mixin of `Api`: messages, discussions, cognitive, ...) extends this class; the few operations one area
uses of another are declared here for the type checker (`Cross-area`), implemented in their own area.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from engram.api.clock import now_us
from engram.api import positions
from engram.api.errors import CODES, ApiError, ambiguous_discussion, unknown_agent, unknown_discussion
from engram.api.jobs import Jobs
from engram.events.envelope import Write
from engram.kernel.ids import validate_agent, validate_discussion
from engram.runtime.base import MissingTable, Row, Runtime

if TYPE_CHECKING:
    from engram.api.events import EventFeed
    from engram.api.webhooks import Post, WebhookDispatcher
    from engram.memory.cognitive.retrieval import RecallResult
    from engram.memory.discussion.memory_files import MemoryFiles
    from engram.api.cognitive import SourceCache
    from engram.memory.context.assemble import Recalled
    from engram.providers.embeddings.base import Embedder
    from engram.providers.llm.tasks import MemoryTasks


class ApiCore:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.config = runtime.config
        self.home = runtime.home
        self.jobs = Jobs()
        # Every (agent, stream) the log knows, refreshed when a lookup misses: a discussion id is unique within its
        # agent only (two agents may each have `my-trip`).
        self._streams: set[tuple[str, str]] = set()
        self._streams_lock = threading.Lock()
        self._stream_writes: dict[tuple[str, str], int] = {}  # (agent, stream) -> appends through this API
        self._query_embedder: Embedder | None = None
        self._files: dict[str, MemoryFiles] = {}  # agent -> its MemoryFiles (caches open vector stores)

    # ------------------------------------------------------------------ what the log knows

    def refresh_streams(self) -> set[tuple[str, str]]:
        with self._streams_lock:
            self._streams = set(self.rt.streams())
            return self._streams

    def known_agents(self) -> set[str]:
        return {a for a, _ in self._streams} or {a for a, _ in self.refresh_streams()}

    def agent_exists(self, agent: str) -> bool:
        """An agent is known when the log has events of it, or its agent.config.json exists (`engram init`)."""
        if any(a == agent for a, _ in self._streams):
            return True
        if any(a == agent for a, _ in self.refresh_streams()):
            return True
        return self.home.agent_config_path(agent).exists()

    def require_agent(self, agent: str) -> str:
        """A read of an agent the home does not know is refused (never recorded as a new agent). The refusal lists
        no agents: the caller may be a key that must not learn of others (`engram.api.access`)."""
        validate_agent(agent)
        if not self.agent_exists(agent):
            raise unknown_agent(agent)
        return agent

    def discussion_agent(self, discussion: str, agent: str | None = None) -> str:
        """`agent`, when it has a discussion `discussion` (a discussion id is unique within its agent only); else
        refused as a discussion that does not exist, naming nobody. Without `agent` (a route given only a discussion
        id): the one agent that has such a discussion; 409 `ambiguous_discussion` when several have (the refusal
        names none of them: the caller names the agent)."""
        validate_discussion(discussion)
        if agent is not None:
            key = (validate_agent(agent), discussion)
            if key in self._streams or key in self.refresh_streams():
                return agent
            raise unknown_discussion(discussion, agent)
        owners = self.discussion_owners(discussion)
        if not owners:
            raise unknown_discussion(discussion)
        if len(owners) > 1:
            raise ambiguous_discussion(discussion)
        return owners[0]

    def discussion_owners(self, discussion: str) -> list[str]:
        """Every agent that has a discussion `discussion`, sorted (read from the runtime: a global route must not
        answer from a stale view that knows only one of them). For the API's own use: never shown to a caller."""
        validate_discussion(discussion)
        return sorted(a for a, s in self.refresh_streams() if s == discussion)

    def claim_discussion(self, agent: str, discussion: str) -> str:
        """A write of `agent` to `discussion`: its own discussion of that id, new or not. Never refused because of
        another agent: each agent has its own namespace of discussion ids."""
        validate_agent(agent)
        return validate_discussion(discussion)

    def read_sql(self, query: str, params: list[Any] | None = None) -> tuple[list[str], list[Row]]:
        """engram's own SQL over the read models, for the inspector's views (each filtered by its agent)."""
        return self.rt.sql(query, params)

    def note_streams(self, writes: Iterable[Write]) -> None:
        """Streams just appended to are known without asking the runtime again, and their appends through this
        API are counted (`stream_writes`: what the proxy's tail record checks)."""
        with self._streams_lock:
            for w in writes:
                key = (w.agent, w.stream)
                self._streams.add(key)
                self._stream_writes[key] = self._stream_writes.get(key, 0) + 1

    def stream_writes(self, agent: str, stream: str) -> int:
        """How many appends to `agent`'s `stream` this API has made (every write path calls `note_streams`)."""
        with self._streams_lock:
            return self._stream_writes.get((agent, stream), 0)

    def forget_streams(self) -> None:
        with self._streams_lock:
            self._streams = set()

    # ------------------------------------------------------------------ read your writes (engram.api.positions)

    def position(self, agent: str, seqs: Iterable[int | None]) -> str | None:
        """The position token of a write of `agent` whose events are at `seqs`."""
        return positions.token(self.rt.shard_of(agent), seqs)

    def reach(self, agent: str, after: str | None, read: str, discussion: str | None = None) -> None:
        """Return once the consumers a `read` of `agent` reads from (`positions.READS`) have handled `after`, the
        position a write answered with; 503 `lagging` (naming what lags) after `limits.readAfterWaitSeconds`.
        Without `after`, at once: a read waits for nobody's writes unless asked."""
        validate_agent(agent)
        wanted = positions.parse(after)
        if not wanted:
            return
        shard = self.rt.shard_of(agent)
        seq = wanted.get(shard, 0)  # a token of writes to agents on other shards only: nothing to wait for
        if seq <= 0:
            return
        lag = self.rt.reach(agent, seq, positions.READS[read], discussion=discussion,
                            timeout=self.config.limits.read_after_wait_seconds)
        if lag is not None:
            raise ApiError(CODES["lagging"], "lagging", positions.lagging_message(shard, seq, lag), retry_after=1.0)

    # ------------------------------------------------------------------ shared helpers

    def sync_settings(self, agent: str, ts_us: int | None = None) -> int:
        return self.rt.sync_settings(agent, ts_us if ts_us is not None else now_us())

    def sql_rows(self, query: str, params: list[Any] | None = None) -> tuple[list[str], list[Row]]:
        """SQL for a read model: a table no projection has written yet reads as no rows."""
        try:
            return self.rt.sql(query, params)
        except MissingTable:
            return [], []

    def query_embedder(self) -> Embedder:
        """Query-time embedding in this process, one model shared by every reader (loaded on first use)."""
        if self._query_embedder is None:
            from engram.providers.services import query_embedder

            self._query_embedder = query_embedder(self.config)
        return self._query_embedder

    def files(self, agent: str) -> MemoryFiles:
        from engram.memory.discussion.memory_files import MemoryFiles
        from engram.config.home import ProjectionPaths

        files = self._files.get(agent)
        if files is None:
            files = self._files[agent] = MemoryFiles(ProjectionPaths(self.home.projections_dir), agent,
                                                     self.config.embedder, self.query_embedder())
        return files

    def event_feed(self) -> EventFeed:
        """The `/v1/events` fan-out of this process (`engram.api.events.EventFeed`), started on first use."""
        feed: EventFeed | None = self.__dict__.get("_event_feed")
        if feed is None:
            from engram.api.events import EventFeed

            with self._streams_lock:
                feed = self.__dict__.setdefault("_event_feed", EventFeed(self.rt))
        return feed

    def start_webhooks(self, post: Post | None = None) -> WebhookDispatcher | None:
        """Start delivering memory changes to the webhooks of engram.json (`webhooks`); None when it names none.
        (`post(url, body, headers, timeout) -> status`: a stand-in transport for tests.)"""
        if not self.config.webhooks:
            return None
        from engram.api.webhooks import WebhookDispatcher

        dispatcher: WebhookDispatcher | None = self.__dict__.get("_webhooks")
        if dispatcher is None:
            dispatcher = self.__dict__["_webhooks"] = WebhookDispatcher(self.event_feed(), self.config.webhooks, post)
        return dispatcher

    def close(self) -> None:
        self.wait_proxy_memory(timeout=120)  # memory creation the proxy started after its responses
        if "_webhooks" in self.__dict__:
            self.__dict__["_webhooks"].close()
        if "_event_feed" in self.__dict__:
            self.__dict__["_event_feed"].close()
        self.jobs.close()
        self.rt.close()

    # ------------------------------------------------------------------ cross-area (implemented in their areas)

    if TYPE_CHECKING:
        def tasks(self) -> MemoryTasks: ...  # engram.api.work

        def source_cache(self) -> SourceCache: ...  # engram.api.cognitive

        def recalled(self, agent: str, discussion: str, query: str, *,
                     exclude_seqs: Sequence[int] = ()) -> list[Recalled]: ...  # engram.api.cognitive

        def _recall(self, agent: str, query: str, *, at: int | None = None, fresh: bool = True,
                    **options: Any) -> RecallResult: ...  # engram.api.cognitive

        def forget_histories(self) -> None: ...  # engram.api.completions

        def wait_proxy_memory(self, timeout: float = 120.0) -> bool: ...  # engram.api.completions

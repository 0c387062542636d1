"""What the cognitive-memory policies share: placement, settings, mood, the embedder, agent memories.

Each cognitive policy hosts logical actors, one per agent, on a pool of Ray actors: a policy
instance handles only the agents that consistent hashing places on its pool member.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, ClassVar

import numpy as np

from engram.config.agent import AgentConfig
from engram.events.envelope import Recorded
from engram.kernel.placement import owner
from engram.memory.cognitive.memory import AgentMemory, VECTOR_TEXT
from engram.memory.cognitive.personality import Pad
from engram.memory.settings import SettingsView
from engram.policies.base import Policy, PolicyContext
from engram.providers.services import embedder_of


# Agents whose cognitive memory one policy process keeps (`ray.residentAgents`): past this, the least recently
# used are evicted, and rebuilt from the log (the events folded so far) when they are needed again. A rebuild
# costs a read of the agent's events and a cache lookup of their vectors, so the default keeps every agent of
# a home of a few thousand (their memories are small: no vector graph below 64 traces, see engram.providers.search.hnsw)
# and bounds larger ones.
DEFAULT_RESIDENT_AGENTS = 4096
# A memory is evicted only after this many batches without use (see `CognitivePolicy.after_batch`).
IDLE_BATCHES = 2


class CognitivePolicy(Policy):
    """A policy over agents' cognitive memory; subclasses set `interests` and implement `handle`.

    Memory is bounded by agents in use, not agents known: `memories` keeps the most recently used
    `resident_agents` (least recently used first); an agent evicted from it is rebuilt, when next needed,
    by folding its events from the log up to `folded_through` (what this policy had folded for every
    agent), which gives the memory it would hold had it never been evicted."""

    uses_memory = False  # True: keep an AgentMemory (book + HNSW index) per owned agent
    content_vectors = False  # True: the memories' HNSW indexes hold content embeddings (see AgentMemory)
    dormant = False  # True: the memories keep decay-pruned traces searchable apart (AgentMemory, dormant traces)
    interests: ClassVar[frozenset[str]]  # every cognitive policy names its events

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.settings = SettingsView()
        self.memories: OrderedDict[str, AgentMemory] = OrderedDict()
        self.evicted: set[str] = set()  # agents with memory in the log that is not held here now
        self.folded_through = 0  # every event up to this seq is folded (or was, for an evicted agent)
        self._memories_lock = threading.RLock()
        self._batches = 0  # batches handled (counted by `after_batch`)
        self._used: dict[str, int] = {}  # agent -> the batch count when its memory was last used

    @property
    def resident_agents(self) -> int:
        config = self.ctx.services.get("config")
        return getattr(getattr(config, "ray", None), "resident_agents", None) or DEFAULT_RESIDENT_AGENTS

    @property
    def folded_types(self) -> list[str]:
        """What `fold` folds into a memory: the policy's events other than settings and messages."""
        return sorted(self.interests - {"SettingsChanged", "MessageAppended"})

    # ------------------------------------------------------------------ placement and configuration

    def owns(self, agent: str) -> bool:
        return owner(agent, self.ctx.members) == self.ctx.member

    def config_of(self, agent: str) -> AgentConfig:
        return self.settings.agent_config(agent)

    def mood_of(self, agent: str) -> Pad:
        """The agent's current mood: the last MoodChanged, else the configured baseline."""
        mem = self.memories.get(agent)
        if mem is not None and mem.book.mood is not None:
            return mem.book.mood
        return Pad.of(self.config_of(agent).mood)

    @property
    def embedder(self):
        return embedder_of(self.ctx.services)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.asarray(self.embedder.embed(texts), dtype=np.float32)

    def embed_async(self, texts: list[str]) -> Callable[[], np.ndarray]:
        """Start embedding `texts`; the returned function waits for the vectors (once). With the home's
        embedder actor the vectors are computed while this policy goes on; in-process, at once."""
        start = getattr(self.embedder, "embed_async", None)
        if not texts or start is None:
            ready = self.embed(texts)
            return lambda: ready
        wait = start(list(texts))
        got: list[np.ndarray] = []

        def vectors() -> np.ndarray:
            if not got:
                got.append(np.asarray(wait(), dtype=np.float32))
            return got[0]

        return vectors

    def prefetch(self, texts: list[str]) -> None:
        """Have the home's embedder actor compute `texts` now, without waiting for them: vectors that other
        consumers will ask for next (their requests are then cache hits). In-process, nothing to gain: no-op."""
        start = getattr(self.embedder, "embed_async", None)
        if texts and start is not None:
            start(list(dict.fromkeys(texts)))

    def embed_query(self, texts: list[str]) -> np.ndarray:
        """Query-time embedding (a recall): the `query_embedder` service, the same model in this process and
        uncached, which answers in milliseconds where a round trip to the home's embedder actor queues
        behind index-time batches; without one, the index-time embedder."""
        embedder = self.ctx.services.get("query_embedder") or self.embedder
        return np.asarray(embedder.embed(texts), dtype=np.float32)

    def memory(self, agent: str) -> AgentMemory:
        self._used[agent] = self._batches
        mem = self.memories.get(agent)
        if mem is not None:
            try:
                self.memories.move_to_end(agent)  # most recently used
            except KeyError:
                pass  # evicted meanwhile: this caller still reads the object it got
            return mem
        with self._memories_lock:
            mem = self.memories.get(agent)
            if mem is None:
                mem = AgentMemory(agent, self.embedder.dim, content_vectors=self.content_vectors, dormant=self.dormant)
                if agent in self.evicted and self.ctx.read is not None:
                    recs = self.ctx.read(0, limit=None, to_seq=self.folded_through, agent=agent, types=self.folded_types)
                    mem.apply_batch(recs, self.embed)
                self.evicted.discard(agent)
                self.memories[agent] = mem
        return mem

    def fold(self, recs: list[Recorded]) -> None:
        """Fold trace/mood/forgetting events of owned agents into their memories, in order; then evict the least
        recently used memories past `resident_agents` (when the log can give them back)."""
        by_agent: dict[str, list[Recorded]] = {}
        for rec in recs:
            by_agent.setdefault(rec.agent, []).append(rec)
        for agent, items in by_agent.items():
            self.memory(agent).apply_batch(items, self.embed)
        if recs:
            self.folded_through = max(self.folded_through, recs[-1].seq)

    def after_batch(self, position: int) -> list[str]:
        """Called by the host once a handled batch's writes are in the log: evict the least recently used memories
        past `resident_agents` among those unused for `IDLE_BATCHES` batches (a memory in use holds decisions whose
        events are on their way back through the log; an idle one holds only what the log gives back)."""
        self._batches += 1
        cap = self.resident_agents
        gone: list[str] = []
        if self.ctx.read is None or len(self.memories) <= cap:
            return gone
        with self._memories_lock:
            for agent in list(self.memories):  # least recently used first
                if len(self.memories) <= cap:
                    break
                if self._batches - self._used.get(agent, 0) < IDLE_BATCHES:
                    break  # the rest were used more recently still
                del self.memories[agent]
                self._used.pop(agent, None)
                self.evicted.add(agent)
                gone.append(agent)
        return gone

    # ------------------------------------------------------------------ snapshots

    def state(self) -> Any:
        return {"settings": self.settings.state(), "memories": self.memories, "evicted": self.evicted,
                "folded_through": self.folded_through}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            self.memories = OrderedDict(state.get("memories", {}))
            self.evicted = set(state.get("evicted", ()))
            self.folded_through = state.get("folded_through", 0)
            for mem in self.memories.values():
                if mem.content_vectors != self.content_vectors:  # a snapshot from before the flag: content vectors
                    mem.content_vectors = self.content_vectors
                    mem.restore_lexical()
                if not mem.content_vectors and mem.vector_text != VECTOR_TEXT:  # indexed by other texts' vectors
                    mem.reembed(self.embed)

"""What the cognitive-memory policies share: placement, settings, mood, the embedder, agent memories.

Each cognitive policy hosts logical actors, one per agent, on a pool of Ray actors: a policy
instance handles only the agents that consistent hashing places on its pool member.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as np

from engram.placement import owner
from engram.cognitive.memory import VECTOR_TEXT, AgentMemory
from engram.cognitive.personality import Pad
from engram.config.agent import AgentConfig
from engram.events.envelope import Recorded
from engram.policies.base import Policy, PolicyContext
from engram.settings import SettingsView

_lock = threading.Lock()
_local_embedders: dict[str, Any] = {}
# One onnxruntime thread per process that embeds in-process: on the 2-core target, Ray actors run
# beside us and a second intra-op thread makes short queries wait (the discussion layer measured
# query p99 13–16 ms with one thread against 135–158 ms with two). A configured count is kept.
EMBEDDER_THREADS = 1


def embedder_of(services: dict[str, Any]):
    """The embedder service; without one (no cache actor in this build), the configured model in-process.

    Loaded once per process and shared by every policy and projection of the process.
    """
    if services.get("embedder") is not None:
        return services["embedder"]
    from engram.embeddings import make_embedder

    from engram.config.llm import EmbedderConfig

    config = services.get("config")
    wanted = config.embedder if config is not None else EmbedderConfig()
    if wanted.threads is None:
        wanted = wanted.model_copy(update={"threads": EMBEDDER_THREADS})
    key = wanted.model_dump_json()
    with _lock:
        found = _local_embedders.get(key)
        if found is None:
            found = _local_embedders[key] = make_embedder(wanted)
    return found


class CognitivePolicy(Policy):
    """A policy over agents' cognitive memory; subclasses set `interests` and implement `handle`."""

    uses_memory = False  # True: keep an AgentMemory (book + HNSW index) per owned agent
    content_vectors = False  # True: the memories' HNSW indexes hold content embeddings (see AgentMemory)

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.settings = SettingsView()
        self.memories: dict[str, AgentMemory] = {}

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
            vectors = self.embed(texts)
            return lambda: vectors
        wait, got = start(list(texts)), []

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
        mem = self.memories.get(agent)
        if mem is None:
            mem = self.memories[agent] = AgentMemory(agent, self.embedder.dim, content_vectors=self.content_vectors)
        return mem

    def fold(self, recs: list[Recorded]) -> None:
        """Fold trace/mood/forgetting events of owned agents into their memories, in order."""
        by_agent: dict[str, list[Recorded]] = {}
        for rec in recs:
            by_agent.setdefault(rec.agent, []).append(rec)
        for agent, items in by_agent.items():
            self.memory(agent).apply_batch(items, self.embed)

    # ------------------------------------------------------------------ snapshots

    def state(self) -> Any:
        return {"settings": self.settings.state(), "memories": self.memories}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            self.memories = state.get("memories", {})
            for mem in self.memories.values():
                if mem.content_vectors != self.content_vectors:  # a snapshot from before the flag: content vectors
                    mem.content_vectors = self.content_vectors
                    mem.restore_lexical()
                if not mem.content_vectors and mem.vector_text != VECTOR_TEXT:  # indexed by other texts' vectors
                    mem.reembed(self.embed)

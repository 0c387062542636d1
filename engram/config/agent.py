"""`agent.config.json`: Wunderland's memory, storage and rag sections, personality and mood."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engram.config import defaults as d
from engram.config.base import ConfigModel

AGENT_CONFIG_FILE_NAME = "agent.config.json"

Trait = Field(0.5, ge=0.0, le=1.0)


class InfiniteContext(ConfigModel):
    enabled: bool = True
    strategy: Literal["sliding", "hierarchical", "hybrid"] = "sliding"
    compaction_threshold: float = Field(d.COMPACTION_THRESHOLD, gt=0.0, le=1.0)
    preserve_recent_turns: int = Field(d.PRESERVE_RECENT_TURNS, ge=0)
    transparency_level: Literal["full", "summary", "none"] = "full"
    max_summary_chain_tokens: int = Field(d.MAX_SUMMARY_CHAIN_TOKENS, gt=0)
    target_compression_ratio: float = Field(d.TARGET_COMPRESSION_RATIO, gt=1.0)
    # The model's context window the threshold is a fraction of.
    context_window_tokens: int = Field(d.CONTEXT_WINDOW_TOKENS, gt=0)


class ObserverSettings(ConfigModel):
    """The Observer (engram.policies.observer): notes from the conversation past `activationTokens`."""

    enabled: bool = True
    activation_tokens: int = Field(d.OBSERVER_ACTIVATION_TOKENS, gt=0)
    # Async buffering: observe every `bufferTokens` unobserved tokens in the background; the buffered notes
    # join the observation log when `activationTokens` is crossed. 0: observe everything at the threshold.
    buffer_tokens: int = Field(d.OBSERVER_BUFFER_TOKENS, ge=0)
    # "discussion" (thread scope, the default): one observation log per discussion; "agent" (resource
    # scope): one per agent across its discussions (notes are still recorded in each discussion's stream).
    scope: Literal["discussion", "agent"] = "discussion"


class ReflectorSettings(ConfigModel):
    """The Reflector (engram.policies.reflector): condenses the observation log past `activationTokens`."""

    enabled: bool = True
    activation_tokens: int = Field(d.REFLECTOR_ACTIVATION_TOKENS, gt=0)


class WorkingMemorySettings(ConfigModel):
    capacity: int = Field(d.WORKING_MEMORY_SLOTS, ge=d.WORKING_MEMORY_MIN_SLOTS, le=d.WORKING_MEMORY_MAX_SLOTS)


class EncodingSettings(ConfigModel):
    flashbulb_threshold: float = Field(d.FLASHBULB_THRESHOLD, ge=0.0, le=1.0)
    # Each user message becomes an episodic trace (AgentOS encodes every input), beside the facts auto-ingest keeps.
    encode_messages: bool = True


class DecaySettings(ConfigModel):
    prune_threshold: float = Field(d.PRUNE_STRENGTH, ge=0.0, le=1.0)
    recency_half_life_hours: float = Field(d.RECENCY_HALF_LIFE_HOURS, gt=0.0)


class ConsolidationSettings(ConfigModel):
    """The Consolidator (engram.policies.consolidator): five maintenance steps at every clock tick."""

    enabled: bool = True
    interval_hours: float = Field(d.CONSOLIDATION_INTERVAL_HOURS, gt=0.0)
    max_traces_per_run: int = Field(d.CONSOLIDATION_MAX_TRACES_PER_RUN, gt=0)
    # Live agents (last message within a day of now) also get ticks from the wall clock.
    wall_clock: bool = True


class RetrievalWeights(ConfigModel):
    """Weights of the six-factor composite (engram.memory.cognitive.scoring); a recall may override any of them."""

    strength: float = Field(d.RETRIEVAL_WEIGHT_STRENGTH, ge=0.0)
    similarity: float = Field(d.RETRIEVAL_WEIGHT_SIMILARITY, ge=0.0)
    recency: float = Field(d.RETRIEVAL_WEIGHT_RECENCY, ge=0.0)
    emotional_congruence: float = Field(d.RETRIEVAL_WEIGHT_EMOTIONAL, ge=0.0)
    graph_activation: float = Field(d.RETRIEVAL_WEIGHT_ACTIVATION, ge=0.0)
    importance: float = Field(d.RETRIEVAL_WEIGHT_IMPORTANCE, ge=0.0)


class SpreadingActivation(ConfigModel):
    seeds: int = Field(d.SPREAD_SEEDS, ge=0)
    hop_decay: float = Field(d.SPREAD_HOP_DECAY, ge=0.0, le=1.0)
    floor: float = Field(d.SPREAD_FLOOR, ge=0.0, le=1.0)
    cap: float = Field(d.SPREAD_CAP, gt=0.0, le=1.0)
    max_depth: int = Field(d.SPREAD_MAX_DEPTH, ge=0)
    max_results: int = Field(d.SPREAD_MAX_RESULTS, ge=0)


class RetrievalSettings(ConfigModel):
    weights: RetrievalWeights = RetrievalWeights()
    # The similarity factor: "hybrid" fuses the embedding cosine with a BM25 keyword match (engram's
    # default, see engram.memory.cognitive.lexical for why); "embedding" is the cosine alone.
    similarity: Literal["hybrid", "embedding"] = "hybrid"
    default_limit: int = Field(d.RECALL_DEFAULT_LIMIT, gt=0)
    candidate_pool: int = Field(d.RECALL_CANDIDATE_POOL, gt=0)
    spreading_activation: SpreadingActivation = SpreadingActivation()


class MemorySection(ConfigModel):
    infinite_context: InfiniteContext = InfiniteContext()
    observer: ObserverSettings = ObserverSettings()
    reflector: ReflectorSettings = ReflectorSettings()
    working_memory: WorkingMemorySettings = WorkingMemorySettings()
    encoding: EncodingSettings = EncodingSettings()
    decay: DecaySettings = DecaySettings()
    consolidation: ConsolidationSettings = ConsolidationSettings()
    retrieval: RetrievalSettings = RetrievalSettings()


class AutoIngest(ConfigModel):
    enabled: bool = True
    importance_threshold: float = Field(d.AUTO_INGEST_IMPORTANCE, ge=0.0, le=1.0)
    max_per_turn: int = Field(d.AUTO_INGEST_MAX_PER_TURN, ge=0)
    deduplication_threshold: float = Field(d.DEDUP_SIMILARITY, ge=0.0, le=1.0)


class StorageSection(ConfigModel):
    auto_ingest: AutoIngest = AutoIngest()


class Hyde(ConfigModel):
    enabled: bool = True
    initial_threshold: float = Field(d.HYDE_INITIAL_THRESHOLD, ge=0.0, le=1.0)
    min_threshold: float = Field(d.HYDE_MIN_THRESHOLD, ge=0.0, le=1.0)
    adaptive_threshold: bool = True


class RagSection(ConfigModel):
    hyde: Hyde = Hyde()


class Personality(ConfigModel):
    """HEXACO traits in [0, 1]; above 0.6 counts as high."""

    honesty: float = Trait
    emotionality: float = Trait
    extraversion: float = Trait
    agreeableness: float = Trait
    conscientiousness: float = Trait
    openness: float = Trait


class Mood(ConfigModel):
    """PAD mood in [-1, 1]: the baseline the agent returns to."""

    valence: float = Field(0.0, ge=-1.0, le=1.0)
    arousal: float = Field(0.0, ge=-1.0, le=1.0)
    dominance: float = Field(0.0, ge=-1.0, le=1.0)


class AgentConfig(ConfigModel):
    memory: MemorySection = MemorySection()
    storage: StorageSection = StorageSection()
    rag: RagSection = RagSection()
    personality: Personality = Personality()
    mood: Mood = Mood()

"""Every number the two guides state, named once. Code refers to these, never to bare literals.

Wunderland guide, "Key Thresholds":
"""

# Observer activation: unobserved conversation tokens before notes are extracted.
OBSERVER_ACTIVATION_TOKENS = 30_000
# Reflector activation: observation-note tokens before they are condensed into traces.
REFLECTOR_ACTIVATION_TOKENS = 40_000
# Working memory (Baddeley): 7 slots, ±1 by personality, kept within 5–9 (7±2).
WORKING_MEMORY_SLOTS = 7
WORKING_MEMORY_MIN_SLOTS = 5
WORKING_MEMORY_MAX_SLOTS = 9
# Flashbulb encoding: emotional intensity above this gets 2x strength and 5x stability.
FLASHBULB_THRESHOLD = 0.8
FLASHBULB_STRENGTH_MULTIPLIER = 2.0
FLASHBULB_STABILITY_MULTIPLIER = 5.0
# Encoding: base strength 0.5; stability starts at 1 hour.
BASE_ENCODING_STRENGTH = 0.5
INITIAL_STABILITY_S = 3_600.0
# Spaced repetition: the reinforcement interval starts at 1 hour and doubles on success.
INITIAL_REINFORCEMENT_INTERVAL_S = 3_600.0
# Decay pruning: traces whose Ebbinghaus strength falls below this are soft-deleted.
PRUNE_STRENGTH = 0.05
# Recency bonus half-life: 0.5 after 24 hours.
RECENCY_HALF_LIFE_HOURS = 24.0
# Consolidation runs every hour (of event time).
CONSOLIDATION_INTERVAL_HOURS = 1.0
# Context compaction starts at 75% of the context window and never touches the last 20 turns.
COMPACTION_THRESHOLD = 0.75
PRESERVE_RECENT_TURNS = 20
MAX_SUMMARY_CHAIN_TOKENS = 2_000
TARGET_COMPRESSION_RATIO = 8
# Auto-ingest: facts need importance >= 0.4; at most 3 per turn.
AUTO_INGEST_IMPORTANCE = 0.4
AUTO_INGEST_MAX_PER_TURN = 3
# Deduplication: cosine similarity at or above this is a duplicate.
DEDUP_SIMILARITY = 0.85
# Personality traits count as "high" above this (HEXACO table of the guide).
HIGH_TRAIT = 0.6
# HyDE: similarity threshold starts at 0.7 and is lowered adaptively down to 0.3.
HYDE_INITIAL_THRESHOLD = 0.7
HYDE_MIN_THRESHOLD = 0.3
# Working-memory markdown file budget: 5% of the context budget.
WORKING_MEMORY_FILE_BUDGET = 0.05

# WilmerAI guide, example settings file and nodes:
CHUNK_ESTIMATED_TOKEN_SIZE = 1_000
MAX_MESSAGES_BETWEEN_CHUNKS = 5
LOOKBACK_START_TURN = 3
VECTOR_MEMORY_MAX_RESPONSE_TOKENS = 1_024
MAX_RESPONSE_SIZE_IN_TOKENS = 400
MIN_MEMORIES_PER_SUMMARY = 3
LOOP_IF_MEMORIES_EXCEED = 3
MAX_SUMMARY_CHUNKS_FROM_FILE = 3
CHUNK_DELIMITER = "--ChunkBreak--"
VECTOR_SEARCH_MAX_KEYWORDS = 60
VECTOR_SEARCH_LIMIT = 5
# "In a new conversation, the file is automatically created on the first memory check (around message 3)".
FIRST_MEMORY_CHECK_MESSAGES = 3

"""Every number the two guides state, named once. Code refers to these, never to bare literals.

Wunderland guide, "Key Thresholds":
"""

# The policy groups (`ray.pools` in engram.json sizes them; `engram.policies.registry.GROUPS` says what runs in each).
POLICY_GROUPS = ("summarizer", "auto-ingest", "working-memory", "traces", "context", "observer", "consolidation")
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
# Hierarchical compaction: a summary tree L0 -> L1 -> L2, "up to 1000x compression".
MAX_SUMMARY_LEVEL = 2
MAX_COMPRESSION_RATIO = 1_000
# The model's context window the compaction threshold is a fraction of (engram's default: a 200K model).
CONTEXT_WINDOW_TOKENS = 200_000
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
# The answer's size of a task that states none (observations, reflections, facts) when its preset sets no maxTokens.
PRESET_MAX_TOKENS = 1_024
MIN_MEMORIES_PER_SUMMARY = 3
LOOP_IF_MEMORIES_EXCEED = 3
MAX_SUMMARY_CHUNKS_FROM_FILE = 3
CHUNK_DELIMITER = "--ChunkBreak--"
VECTOR_SEARCH_MAX_KEYWORDS = 60
VECTOR_SEARCH_LIMIT = 5
# "In a new conversation, the file is automatically created on the first memory check (around message 3)".
FIRST_MEMORY_CHECK_MESSAGES = 3

# ---------------------------------------------------------------------------------------------
# Cognitive memory (Wunderland/AgentOS): the formulas of engram.memory.cognitive and their constants.
# Numbers the guide states are above (FLASHBULB_*, BASE_ENCODING_STRENGTH, INITIAL_STABILITY_S,
# INITIAL_REINFORCEMENT_INTERVAL_S, PRUNE_STRENGTH, RECENCY_HALF_LIFE_HOURS, WORKING_MEMORY_*,
# AUTO_INGEST_*, DEDUP_SIMILARITY, HIGH_TRAIT, HYDE_*); the ones below are engram's choices.

# Encoding (engram.memory.cognitive.encoding):
#   strength  = BASE_ENCODING_STRENGTH · attention · mood_congruence · (FLASHBULB_STRENGTH_MULTIPLIER if flashbulb)
#   stability = INITIAL_STABILITY_S · (FLASHBULB_STABILITY_MULTIPLIER if flashbulb)
#   attention = 1 + Σ_trait ATTENTION_GAIN · (trait − TRAIT_NEUTRAL) · relevance(trait, content)
#   mood_congruence = 1 + MOOD_CONGRUENT_ENCODING_GAIN · max(0, mood.valence · content.valence)
ATTENTION_GAIN = 0.4
TRAIT_NEUTRAL = 0.5
MOOD_CONGRUENT_ENCODING_GAIN = 0.3
#   the trace's PAD snapshot = CONTENT_EMOTION_WEIGHT · content PAD + (1 − CONTENT_EMOTION_WEIGHT) · mood PAD
CONTENT_EMOTION_WEIGHT = 0.7

# Reinforcement on retrieval (engram.memory.cognitive.decay.reinforce), "desirable difficulty":
#   stability' = stability · (1 + gain · spacing),  spacing = min(1, time since last access / interval),  gain = (STABILITY_GAIN_BASE + STABILITY_GAIN_DIFFICULTY · difficulty)
#                                               · (1 + EMOTIONAL_CONSOLIDATION · intensity)
#                                               / (1 + STABILITY_GAIN_DIMINISH · retrievals so far)
#   difficulty = max(MIN_DIFFICULTY, 1 − min(1, S(t)))   (a weaker memory gains more)
#   S0' = max(S0, min(REINFORCED_STRENGTH_CAP, S(t) + boost)),  last access = t,
#         boost = REINFORCEMENT_STRENGTH_BOOST when the review was due (t >= next due), else 0 (the spacing effect:
#         massed retrievals earn no strength; see engram.memory.cognitive.decay)
#   interval' = min(MAX_REINFORCEMENT_INTERVAL_S, interval · (1 + (REINFORCEMENT_INTERVAL_GROWTH − 1) · spacing)),
#   next due = t + interval' (the spacing effect: a retrieval before the trace is due strengthens it less; see
#   engram.memory.cognitive.decay for the rule, its bound and its sources)
STABILITY_GAIN_BASE = 0.5
STABILITY_GAIN_DIFFICULTY = 2.0
MIN_DIFFICULTY = 0.1
STABILITY_GAIN_DIMINISH = 0.1
EMOTIONAL_CONSOLIDATION = 0.3
REINFORCEMENT_STRENGTH_BOOST = 0.1
REINFORCED_STRENGTH_CAP = 1.0
REINFORCEMENT_INTERVAL_GROWTH = 2.0
# The interval stops doubling at one year: a memory reviewed yearly is as settled as review makes it.
MAX_REINFORCEMENT_INTERVAL_S = 365 * 86_400.0
# The decay sweep soft-deletes at most this many traces per run (the Consolidator's bound).
DECAY_SWEEP_MAX_TRACES = 10_000

# Retrieval: the six-factor composite (engram.memory.cognitive.scoring), score = Σ weight · factor, each factor in [0, 1]:
#   strength   = min(1, S0 · exp(−Δt / stability))          Δt since last access, event time
#   similarity = max(0, cosine(query, trace))               via the agent's HNSW index ("embedding"), or, by default
#                ("hybrid", memory.retrieval.similarity):
#                (1 − SIMILARITY_LEXICAL_SHARE) · that cosine + SIMILARITY_LEXICAL_SHARE · lexical match,
#                lexical match = min(1, BM25(query, trace) / Σ idf(query terms))   (engram.memory.cognitive.lexical)
#   recency    = 0.5 ** (age / RECENCY_HALF_LIFE_HOURS)      age since the trace was encoded
#   emotional  = max(0, mood.valence · trace.valence)        mood-congruent recall
#   activation = spreading activation from the top seeds     (below)
#   importance = the trace's own importance
# Similarity leads: strength and recency say how alive a memory is, not whether it answers the query.
# Weights: similarity leads, association (graph activation) comes second, and the four "state" factors
# (strength, recency, emotional congruence, importance) share the rest equally.
# Hybrid similarity: the keywords' share. It was 0.5 (equal say, neither known to be the better judge) while
# the query vector embedded the whole question. Since the query is embedded *focused* (its words most memories
# hold left out, QUERY_FOCUS_COMMON_SHARE) and HyDE adds the hypothesis' wording, the cosine already hears the
# question's rare words: the two judges are no longer independent, and at equal say the keywords count those
# words twice, ranking a memory that merely names them above one that says the thing. The keywords still
# decide among traces of near-equal cosine and still bring in candidates the embedding misses (step 1).
# Chosen on LoCoMo conv-26 only (all/multi-hop recall@10, bench/recall.py in order with reinforcement):
# 0.2 → 82.4/55.7, 0.25 → 84.0/57.8, 0.3 → 84.4/60.4, 0.35 → 84.2/60.4, 0.4 → 84.4/58.9, 0.45 → 84.2/54.2,
# 0.5 → 84.3/54.9, 0.6 → 82.8/51.8. Held out, 0.5 → 0.3: conv-30 83.2/62.3 → 82.7/66.8, conv-41
# 84.9/65.6 → 86.1/66.9; questions in reverse order the same (multi-hop 59.5 → 64.1).
SIMILARITY_LEXICAL_SHARE = 0.3
RETRIEVAL_WEIGHT_STRENGTH = 0.05
RETRIEVAL_WEIGHT_SIMILARITY = 0.65
RETRIEVAL_WEIGHT_RECENCY = 0.05
RETRIEVAL_WEIGHT_EMOTIONAL = 0.05
RETRIEVAL_WEIGHT_ACTIVATION = 0.15
RETRIEVAL_WEIGHT_IMPORTANCE = 0.05
RECALL_DEFAULT_LIMIT = 10
# Query focus (engram.memory.cognitive.lexical.focus): the query's embedding leaves out the words more than this share of
# the agent's traces hold (its interlocutors' names, everyday words): they say nothing about which memory is meant.
QUERY_FOCUS_COMMON_SHARE = 0.1
# Pseudo-relevance feedback (engram.memory.cognitive.retrieval, step 3; Rocchio): the FEEDBACK_TRACES best first-stage
# candidates are taken as relevant; the feedback query is the query vector + FEEDBACK_VECTOR_WEIGHT · their mean
# stored vector, and the query's terms (weight 1) + their FEEDBACK_TERMS most characteristic other terms (weight
# FEEDBACK_TERM_WEIGHT). Its best keyword matches join the candidates (its vector is not searched), and similarity becomes
# (1 − FEEDBACK_SHARE) · similarity to the query + FEEDBACK_SHARE · similarity to the feedback query.
# Classic Rocchio/RM3 settings (3 documents, 10 terms, half weight), not fitted to a benchmark.
FEEDBACK_TRACES = 3
FEEDBACK_TERMS = 10
FEEDBACK_TERM_WEIGHT = 0.5
FEEDBACK_VECTOR_WEIGHT = 1.0
FEEDBACK_SHARE = 0.5
# Candidates scored per query: this many nearest traces by cosine (at least 4 · limit), plus what spreading reaches.
RECALL_CANDIDATE_POOL = 50
# Dormant traces (engram.memory.cognitive.retrieval, step 8): the DORMANT_POOL best decay-pruned traces for a query (by cosine
# and by keywords) are scored as active candidates are, their composite multiplied by DORMANT_WEIGHT. DORMANT_POOL = 0
# turns the stage off.
DORMANT_POOL = 10
# 1.0 (issue 24; was 0.85): a pruned trace already ranks below an active one of equal match by its own strength (below
# the prune threshold) and recency; x 0.85 penalised it twice. Chosen leave-one-conversation-out on LoCoMo dev (0.85 /
# 0.9 / 1.0, both question orders): 1.0 in every fold; held out r@10 84.4/84.6/86.4 (0.85: 84.4/82.7/86.1), r@5
# 74.9/74.6/77.3 (74.1/71.8/75.9), multi-hop 60.4/66.8/69.6 (60.4/66.8/66.9).
DORMANT_WEIGHT = 1.0
# A trace whose every sentence is a question (engram.memory.cognitive.indexing.asks) states nothing: evidence of
# interest, not of a fact. Its composite x QUESTION_WEIGHT, so a statement that answers a query ranks above a stored
# question that resembles it (issue 24). On LoCoMo dev no item's recall changes, in either question order.
QUESTION_WEIGHT = 0.5
# What a recalled memory shows (engram.memory.cognitive.shown): the best SHOWN_WHOLE_HITS hits whole, the others'
# content longer than SHOWN_SNIPPET_WORDS words as the sentences that share the query's words; a reply's context cut to
# its speaker and last question, at most SHOWN_CONTEXT_WORDS words; a sentence a better hit shows is not repeated.
# LoCoMo dev tokens@10 437 -> 334.5 (every conversation <= 350: 335/315/345), no evidence id lost; the share of the
# gold answer's words in the top 10 63.2 -> 60.8 (issue 24).
SHOWN_WHOLE_HITS = 3
SHOWN_SNIPPET_WORDS = 25
SHOWN_CONTEXT_WORDS = 8
# Traces that take focus in working memory from one retrieval (its best results).
WORKING_MEMORY_FOCUS_PER_RETRIEVAL = 3

# Spreading activation (engram.memory.cognitive.graph.spread): breadth-first from the SPREAD_SEEDS best candidates,
# seed activation = their similarity; a neighbour receives activation · edge weight · SPREAD_HOP_DECAY / fan per hop,
# fan = the sum of the sender's edge weights, at least 1 (ACT-R's fan effect: a hub's activation is spread thin);
# contributions below SPREAD_FLOOR are skipped; received activation is summed and capped at SPREAD_CAP;
# at most SPREAD_MAX_DEPTH hops and SPREAD_MAX_RESULTS activated traces.
SPREAD_SEEDS = 5
SPREAD_HOP_DECAY = 0.5
SPREAD_FLOOR = 0.05
SPREAD_CAP = 1.0
SPREAD_MAX_DEPTH = 2
SPREAD_MAX_RESULTS = 20
# Hebbian co-activation: each pair among the HEBBIAN_TOP best results of a retrieval that the query itself found
# (by similarity, keywords or HyDE; not those only spreading activation brought in, which would let the graph
# feed its own edges) gets
#   w' = w + HEBBIAN_RATE · (1 − w)   (a new co_activated edge starts at HEBBIAN_RATE)
HEBBIAN_RATE = 0.1
HEBBIAN_TOP = 5
# Edges made when a trace is encoded (engram.memory.cognitive.linking):
#   temporal_sequence to the previous trace of the same discussion within TEMPORAL_EDGE_WINDOW_S,
#   same_topic to up to SAME_TOPIC_MAX_EDGES traces with cosine >= SAME_TOPIC_SIMILARITY (weight = cosine),
#   shared_entity to the SHARED_ENTITY_MAX_EDGES most recent traces naming one of its entities.
TEMPORAL_EDGE_WEIGHT = 0.6
TEMPORAL_EDGE_WINDOW_S = 6 * 3_600
SAME_TOPIC_SIMILARITY = 0.6
# A fact with a subject/attribute slot ("works at Acme") is checked for a change of state against this many of the most
# recent active facts naming its speaker that have a slot too (`engram.memory.cognitive.slots`).
SLOT_CANDIDATES = 200
SAME_TOPIC_MAX_EDGES = 3
SHARED_ENTITY_WEIGHT = 0.4
SHARED_ENTITY_MAX_EDGES = 3

# Working memory (Baddeley; engram.memory.cognitive.working_memory): a focused trace enters at WM_INITIAL_ACTIVATION
# (a trace already in focus gains WM_REFOCUS_BOOST, up to 1); every turn each slot loses WM_DECAY_PER_TURN;
# a slot below WM_EVICTION_FLOOR is evicted, and at capacity the weakest makes room.
# Prompt tags: activation > WM_ACTIVE_ABOVE "[ACTIVE]", > WM_FADING_ABOVE "[fading]", else "[weak]".
WM_INITIAL_ACTIVATION = 0.8
WM_REFOCUS_BOOST = 0.2
WM_DECAY_PER_TURN = 0.1
WM_EVICTION_FLOOR = 0.15
WM_ACTIVE_ABOVE = 0.7
WM_FADING_ABOVE = 0.4

# Auto-ingest under HEXACO (the guide's table; engram.memory.cognitive.personality.ingest_rules):
# honesty > HIGH_TRAIT lowers the deduplication threshold by HONESTY_DEDUP_DROP;
# agreeableness > HIGH_TRAIT adds AGREEABLENESS_EXTRA_RESULTS to the default number of retrieval results.
HONESTY_DEDUP_DROP = 0.05
AGREEABLENESS_EXTRA_RESULTS = 2
# conscientiousness > HIGH_TRAIT compacts CONSCIENTIOUSNESS_COMPACTION_FREQUENCY times as often: the compaction
# threshold (compactionThreshold of the context window) divided by it, 0.75 -> 0.5 by default
# (engram.memory.context.rules.effective).
# After a compaction the context holds the chain and the preserved turns; the next compaction waits for the threshold's
# worth of new turns, so two thirds of the threshold is 1.5 times the frequency.
CONSCIENTIOUSNESS_COMPACTION_FREQUENCY = 1.5
# Sentiment tracking (emotionality > HIGH_TRAIT): mood' = mood + MOOD_CONTAGION · (message PAD − mood)
# for a message with emotional words whose intensity is at least MOOD_TRACKING_MIN_INTENSITY.
MOOD_CONTAGION = 0.2
MOOD_TRACKING_MIN_INTENSITY = 0.3

# HyDE (engram.memory.cognitive.hyde): start at HYDE_INITIAL_THRESHOLD, lower by HYDE_THRESHOLD_STEP per round
# until a result clears it or HYDE_MIN_THRESHOLD is reached.
HYDE_THRESHOLD_STEP = 0.1
# Episodic traces of user messages (engram.policies.auto_ingest): importance is the highest importance of the
# facts the message yielded (kept or not), else EPISODE_BASE_IMPORTANCE; content is cut at EPISODE_MAX_CHARS.
EPISODE_BASE_IMPORTANCE = 0.3
EPISODE_MAX_CHARS = 2_000
# What a trace is indexed by (engram.memory.cognitive.indexing): a reply's traces carry the question it answers,
# cut to this many characters (a question; not a second message).
REPLY_CONTEXT_MAX_CHARS = 400
# Auto-ingest asks the memory tasks for every fact of a turn (up to this many) and applies its rules itself,
# so that what was skipped, and why, is recorded too.
EXTRACT_MAX_FACTS = 32
# Confidence of a trace by its source (provenance): what the user states, what the agent infers,
# what a tool returned.
USER_STATEMENT_CONFIDENCE = 0.8
AGENT_INFERENCE_CONFIDENCE = 0.6
TOOL_RESULT_CONFIDENCE = 0.9

# ---------------------------------------------------------------------------------------------
# Background processes (engram.memory.background): the Observer, the Reflector and the Consolidator.
# The guide's numbers are above (OBSERVER_ACTIVATION_TOKENS, REFLECTOR_ACTIVATION_TOKENS,
# CONSOLIDATION_INTERVAL_HOURS, PRUNE_STRENGTH, HIGH_TRAIT); the ones below are engram's choices.

# Observer async buffering: the conversation is observed in increments of this many unobserved tokens
# (a fifth of the 30K threshold, Mastra's default bufferTokens of 0.2), recorded as buffered notes that
# join the observation log when the threshold is crossed; 0 observes everything at the threshold instead.
OBSERVER_BUFFER_TOKENS = 6_000
# Reflector: existing traces shown to the reflect task so it can flag contradictions (those sharing an
# entity with the notes, most recent first).
REFLECTOR_EXISTING_TRACES = 64
# A reflection's candidate whose words (BM25 tokens) overlap an active trace naming the same entities at
# least this much (Jaccard) restates it (typically auto-ingest's fact of the same message): that trace is
# verified instead of a second copy being stored.
REFLECTION_RESTATES_OVERLAP = 0.9
# A reflection trace's edges (engram.memory.cognitive.linking): shared-entity and temporal-sequence links; a
# contradiction adds `contradicts` (newer -> older) and, when one side loses, `supersedes` (winner -> loser).
CONTRADICTION_EDGE_WEIGHT = 1.0
SUPERSEDES_EDGE_WEIGHT = 1.0

# Consolidation (AgentOS ConsolidationPipeline): each step handles at most this many traces per run
# (AgentOS maxTracesPerCycle); what is left over waits for the next run.
CONSOLIDATION_MAX_TRACES_PER_RUN = 500
# Co-activation replay over the traces encoded in the last REPLAY_WINDOW_S (AgentOS: 24 hours):
#   traces naming the same entity (the REPLAY_MAX_PER_ENTITY most recent per entity) -> shared_entity, weight REPLAY_ENTITY_WEIGHT
#   traces encoded within REPLAY_TEMPORAL_GAP_S of each other (consecutive) -> temporal_sequence, weight REPLAY_TEMPORAL_WEIGHT
REPLAY_WINDOW_S = 86_400
REPLAY_MAX_PER_ENTITY = 10
REPLAY_ENTITY_WEIGHT = 0.5
REPLAY_TEMPORAL_GAP_S = 300
REPLAY_TEMPORAL_WEIGHT = 0.3
# Schema integration: episodic traces of one discussion whose embeddings are within SCHEMA_SIMILARITY
# (cosine) of a seed form a cluster of SCHEMA_MIN_CLUSTER (AgentOS minClusterSize) to SCHEMA_MAX_CLUSTER
# members; each cluster becomes a semantic trace linked from its members by schema_instance edges.
SCHEMA_MIN_CLUSTER = 5
SCHEMA_MAX_CLUSTER = 12
SCHEMA_SIMILARITY = 0.6
SCHEMA_INSTANCE_WEIGHT = 0.6
# Spaced repetition reviews the due traces that have a review schedule worth keeping: those retrieved at
# least once (a retrieval starts the schedule, as in AgentOS), flashbulb memories, traces the Reflector or
# schema integration made long-term, and traces at least as important as auto-ingest asks of a fact worth
# storing (0.4). Everything else (small talk, messages that said nothing notable) is left to the Ebbinghaus
# curve and the decay sweep.
REVIEW_MIN_IMPORTANCE = AUTO_INGEST_IMPORTANCE
# Clock ticks (engram.memory.background.clock). Event time: an agent's traces passing one or more interval boundaries
# bring one tick, at the latest (consolidation does what fell due in between, each at its own boundary).
# Wall clock: the actor shell ticks agents whose last message is within LIVE_AGENT_WINDOW_S of now.
LIVE_AGENT_WINDOW_S = 86_400

"""Every number the offline heuristic uses, named once. Changing one changes the heuristic's
output, so bump OFFLINE_MODEL's version with it (recorded outputs name the version that made them)."""

# The model name recorded in every LlmCall of the offline provider.
OFFLINE_MODEL = "offline-heuristic-v1"

# --- Extractive summaries
# A chunk summary uses at most this share of the chunk's tokens (and at most the caller's max_tokens).
CHUNK_SUMMARY_SHARE = 0.25
# ...but at least this many tokens, so that a short chunk still gets a sentence.
MIN_SUMMARY_TOKENS = 40
# Sentences with fewer content words are chit-chat and never selected.
MIN_CONTENT_WORDS = 2
# Score bonuses per sentence: each entity (capped), a number, a time reference, a cue of any type.
ENTITY_BONUS = 0.15
MAX_ENTITY_BONUSES = 3
NUMBER_BONUS = 0.1
TIME_BONUS = 0.15
CUE_BONUS = 0.2
# A stated constraint (allergy, diet, deadline) outranks the sentences around it: forgetting it costs most.
CONSTRAINT_BONUS = 1.0
# Questions usually ask rather than tell.
QUESTION_FACTOR = 0.5
# SumBasic redundancy control: a selected sentence's words count this much less afterwards.
REDUNDANCY_DECAY = 0.5
# Rolling summary: newer memories outrank older summary text by this factor.
RECENCY_FACTOR = 1.3

# --- Observer
# Notes use at most this share of the observed tokens (the guide promises 5–40x compression).
OBSERVATION_TOKEN_SHARE = 0.12
# ...but at least this many tokens, so that a short exchange can still yield a note.
MIN_OBSERVATION_TOKENS = 40
# A sentence needs this much evidence to become a note.
MIN_NOTE_EVIDENCE = 0.5
# Base importance per observation type; evidence, entities and emotion add to it.
NOTE_BASE_IMPORTANCE = {
    "factual": 0.35,
    "emotional": 0.35,
    "commitment": 0.6,
    "preference": 0.5,
    "creative": 0.4,
    "correction": 0.65,
}
ENTITY_IMPORTANCE = 0.04
TIME_IMPORTANCE = 0.12
NUMBER_IMPORTANCE = 0.04
INTENSITY_IMPORTANCE = 0.15
# Confidence of heuristic notes and facts: lower than a model's default 0.7, because it is a guess.
OFFLINE_CONFIDENCE = 0.5
# Observation text longer than this many characters is cut at a word boundary.
MAX_NOTE_CHARS = 220

# --- Auto-ingest facts
FACT_BASE_IMPORTANCE = {
    "user_preference": 0.5,
    "episodic": 0.4,
    "goal": 0.55,
    "knowledge": 0.4,
    "correction": 0.6,
    "action_item": 0.55,
    "emotional_context": 0.4,
}

# --- Reflector
# Notes whose content stems overlap at least this much (Jaccard) are merged into one trace.
MERGE_SIMILARITY = 0.34
# ...and at this overlap two notes or a note and a trace are about the same thing (contradiction check).
SAME_SUBJECT_SIMILARITY = 0.25
# A merged cluster becomes a trace only if its best note is at least this important.
TRACE_MIN_IMPORTANCE = 0.4
# A trace holds at most this many of its notes' texts.
MAX_NOTES_PER_TRACE = 3
# Each further note that agrees raises a trace's confidence by this much (capped at 1).
AGREEMENT_CONFIDENCE = 0.1

# --- Structured memory
MAX_KEY_PHRASES = 8
MAX_ENTITIES = 12
MAX_TOPICS = 3
TITLE_PHRASES = 2

# --- Responder (the respond task)
# The offline answer quotes at most this many context sentences, best match first.
RESPOND_MAX_SENTENCES = 3

"""Auto-ingest: which facts of a turn become traces.

After each turn the memory tasks extract categorised facts (user_preference, episodic, goal,
knowledge, correction, action_item, emotional_context). Of those, a fact is kept when
1. its category is stored under the agent's personality (action items need conscientiousness,
   emotional context needs openness or emotionality),
2. its importance is at least the threshold (0.4; lower for high openness),
3. it is not a near-duplicate: cosine < 0.85 (lower for high honesty) with every trace of the agent
   that was alive when the message was said and with the facts kept before it in the same turn (a
   duplicate instead counts as a verification of the trace it restates — unless the assistant said it:
   the assistant restating a memory is quoting it, "quoted", which verifies nothing),
4. and fewer than 3 facts (4 for high openness) were kept from the turn already, most important first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from engram.config import defaults as d
from engram.config.agent import AgentConfig
from engram.events.cognitive import SkippedFact
from engram.memory.cognitive import llm_bridge
from engram.memory.cognitive.personality import high

# Fact category -> the kind of trace it becomes.
TRACE_TYPE_OF = {
    "user_preference": "semantic",
    "episodic": "episodic",
    "goal": "prospective",
    "knowledge": "semantic",
    "correction": "semantic",
    "action_item": "prospective",
    "emotional_context": "episodic",
}
# The categories only the user's own words can fill (the guide: "user_preference — what the user likes/dislikes",
# "goal — what the user wants to achieve"). The assistant's (or a tool's) statement is neither, whatever the
# extractor called it ("Assistant: A one-week deadline is tight but doable." is not a user preference): it is what
# happened in the conversation, "episodic", typed by who said it (`category_of`).
USER_ONLY_CATEGORIES = frozenset({"user_preference", "goal"})
SPOKEN_BY_OTHERS = "episodic"


def category_of(role: str, category: str) -> str:
    """A fact's category by who said it: a user-only category said by the assistant or a tool is episodic."""
    if role in ("assistant", "tool") and category in USER_ONLY_CATEGORIES:
        return SPOKEN_BY_OTHERS
    return category


# What users tell the agent about themselves and the world holds in every discussion (agent scope);
# what happened, and what to do next here, belongs to the discussion.
AGENT_SCOPED = frozenset({"user_preference", "goal", "knowledge", "correction"})

# Message role -> (source type, confidence of what it says).
SOURCE_OF_ROLE = {
    "user": ("user_statement", d.USER_STATEMENT_CONFIDENCE),
    "assistant": ("agent_inference", d.AGENT_INFERENCE_CONFIDENCE),
    "tool": ("tool_result", d.TOOL_RESULT_CONFIDENCE),
    "system": ("user_statement", d.USER_STATEMENT_CONFIDENCE),
}


@dataclass(frozen=True)
class Candidate:
    """A fact as the memory tasks returned it."""

    category: str
    content: str
    importance: float
    entities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kept:
    fact: Candidate
    vector: np.ndarray
    novelty: float  # 1 − the highest cosine with an existing trace
    similar: tuple[tuple[str, float], ...]  # nearest existing traces (for same-topic edges)


@dataclass(frozen=True)
class Selection:
    kept: tuple[Kept, ...]
    skipped: tuple[SkippedFact, ...]


def unembedded_skip(f: Candidate, rules: IngestRules) -> str | None:
    """Why `f` is skipped before its embedding is looked at ("category", "below_threshold"), or None: only
    the facts this returns None for need a vector (`select` reads no other row of its `vectors`)."""
    if f.category not in rules.categories:
        return "category"
    if f.importance < rules.importance_threshold:
        return "below_threshold"
    return None


def select(
    facts: Sequence[Candidate],
    vectors: np.ndarray,
    rules: IngestRules,
    nearest: Callable[[np.ndarray], list[tuple[str, float]]],
    *,
    quoting: bool = False,
) -> Selection:
    """Apply the auto-ingest rules to one turn's `facts` (with their embeddings, row by row).

    `quoting`: the speaker is the assistant, whose restatement of a memory is a quote, not a verification."""
    kept: list[Kept] = []
    skipped: list[SkippedFact] = []

    def skip(f: Candidate, reason: str, dup: str | None = None, sim: float | None = None) -> None:
        skipped.append(
            SkippedFact(
                content=f.content, category=f.category, importance=f.importance, reason=reason,
                duplicate_of=dup, similarity=None if sim is None else round(sim, 6),
            )
        )

    order = sorted(range(len(facts)), key=lambda i: (-facts[i].importance, i))
    for i in order:
        f = facts[i]
        reason = unembedded_skip(f, rules)
        if reason is not None:
            skip(f, reason)
            continue
        v = np.asarray(vectors[i], dtype=np.float32)
        similar = nearest(v)
        best_id, best = (similar[0] if similar else (None, -1.0))
        if best_id is not None and best >= rules.dedup_threshold:
            skip(f, "quoted", None, best) if quoting else skip(f, "duplicate", best_id, best)
            continue
        twin = next(((k, float(k.vector @ v)) for k in kept if float(k.vector @ v) >= rules.dedup_threshold), None)
        if twin is not None:
            skip(f, "duplicate", None, twin[1])
            continue
        if len(kept) >= rules.max_per_turn:
            skip(f, "over_limit")
            continue
        kept.append(Kept(fact=f, vector=v, novelty=max(0.0, 1.0 - max(0.0, best)), similar=tuple(similar)))
    return Selection(kept=tuple(kept), skipped=tuple(skipped))


# The user telling the agent their name: "my name is Priya", "my name's Ana Lucia", "call me Jo", "I go by Sam".
_STATED_NAME = re.compile(
    r"\b(?:my name is|my name's|my name’s|call me|i go by|people call me)\s+"
    r"((?:[A-Z][\w'’-]*\.?)(?:\s+(?:[A-Z][\w'’-]*\.?|de|da|van|von|del|la|le)){0,3})"
)
# A tag on the traces of a message that states the user's name (the working-memory profile reads it).
NAME_TAG = "name:"
# What a user says about who they are is worth keeping (at least as important as auto-ingest asks of a fact).
IDENTITY_IMPORTANCE = 0.6


def stated_name(text: str) -> str | None:
    """The name a message states as its speaker's own, or None."""
    m = _STATED_NAME.search(text)
    if m is None:
        return None
    name = m.group(1).strip().rstrip(".")
    while name.split() and name.split()[-1].lower() in {"de", "da", "van", "von", "del", "la", "le"}:
        name = " ".join(name.split()[:-1])
    return name or None


@dataclass(frozen=True)
class IngestRules:
    """Auto-ingest under a personality (the guide's table)."""

    importance_threshold: float
    max_per_turn: int
    dedup_threshold: float
    categories: frozenset[str]
    boosted: frozenset[str]
    extra_results: int  # added to the default number of retrieval results
    sentiment_tracking: bool


def ingest_rules(config: AgentConfig) -> IngestRules:
    """What auto-ingest keeps for this agent: the configured numbers adjusted by HEXACO.

    Categories, boosts, threshold and per-turn limit are the LLM layer's reading of the same table
    (`engram.providers.llm.focus.ingest_policy`, which its fact extraction applies); deduplication, retrieval
    results and sentiment tracking are added here.
    """
    p, auto = config.personality, config.storage.auto_ingest
    policy = llm_bridge.ingest_policy(p, auto.importance_threshold, auto.max_per_turn)
    dedup = auto.deduplication_threshold - (d.HONESTY_DEDUP_DROP if high(p, "honesty") else 0.0)
    return IngestRules(
        importance_threshold=policy.importance_threshold,
        max_per_turn=policy.max_per_turn,
        dedup_threshold=round(dedup, 6),
        categories=frozenset(policy.categories),
        boosted=frozenset(policy.boosted),
        extra_results=d.AGREEABLENESS_EXTRA_RESULTS if high(p, "agreeableness") else 0,
        sentiment_tracking=high(p, "emotionality"),
    )

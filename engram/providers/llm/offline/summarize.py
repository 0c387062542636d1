"""Extractive summaries within a token budget: sentence scoring and redundancy-aware selection.

Scoring is SumBasic-like (Nenkova & Vanderwende, 2005): a sentence is worth the mean frequency of
its content words in the span, plus bonuses for entities, numbers, time references and cue words;
once a sentence is chosen its words count less, so the next choice says something new. The
selection is lazy-greedy (scores only fall as words are used), so long spans stay fast.
Selected sentences are written in third person and in their original order.
"""

from __future__ import annotations

import heapq
from typing import Callable, Sequence

from engram.events.envelope import iso
from engram.kernel.tokens import CHARS_PER_TOKEN
from engram.providers.llm.offline import tuning as k
from engram.providers.llm.offline.analysis import MEMORY_ROLE, Unit
from engram.providers.llm.offline.rewrite import to_third_person
from engram.providers.llm.offline.text import clip_words

_CUES_THAT_COUNT = ("commitment", "preference", "correction", "goal", "episodic", "action_item", "constraint")


def render_unit(u: Unit) -> str:
    """A sentence as a summary states it: third person, filler gone, relative time resolved."""
    if u.line.role == MEMORY_ROLE:
        return u.clean or u.text  # already a memory: nobody's "I" to rewrite
    text = to_third_person(u.clean or u.text, u.speaker)
    if u.speaker.lower() not in text.lower():
        text = f"{u.speaker}: {text}"
    if u.refers_to and u.refers_to not in text:
        text = f"{text.rstrip()} ({u.refers_to})"
    return text


def static_bonus(u: Unit) -> float:
    names = sum(1 for e in u.entities if e.kind in ("person", "place", "name"))
    bonus = k.ENTITY_BONUS * min(names, k.MAX_ENTITY_BONUSES)
    if u.has_number:
        bonus += k.NUMBER_BONUS
    if u.refers_to:
        bonus += k.TIME_BONUS
    if any(u.cue[c] for c in _CUES_THAT_COUNT):
        bonus += k.CUE_BONUS
    if u.cue["constraint"]:  # a stated constraint (allergy, diet, deadline) must survive into the summary
        bonus += k.CONSTRAINT_BONUS
    return bonus


def select(
    units: Sequence[Unit],
    budget_chars: int,
    render: Callable[[Unit], str] = render_unit,
    weight: Callable[[Unit], float] | None = None,
    separator: str = " ",
    in_order: bool = True,
) -> list[tuple[Unit, str]]:
    """The best units whose rendered texts fit in `budget_chars`: in original order, or best first."""
    candidates = [u for u in units if not u.chitchat and u.stems]
    if not candidates:
        return []
    freq: dict[str, float] = {}
    for u in candidates:
        for s in set(u.stems):
            freq[s] = freq.get(s, 0.0) + 1.0
    top = max(freq.values())
    prob = {s: c / top for s, c in freq.items()}
    rendered: dict[int, str] = {}  # rendered when first considered: most sentences never are
    base = {u.index: static_bonus(u) for u in candidates}
    factor = {
        u.index: (k.QUESTION_FACTOR if u.question else 1.0) * (weight(u) if weight else 1.0) for u in candidates
    }
    stems = {u.index: tuple(dict.fromkeys(u.stems)) for u in candidates}
    by_index = {u.index: u for u in candidates}

    def score(i: int) -> float:
        st = stems[i]
        return (sum(prob[s] for s in st) / len(st) + base[i]) * factor[i]

    heap = [(-score(u.index), u.index) for u in candidates]
    heapq.heapify(heap)
    chosen: list[int] = []
    used = 0
    while heap:
        neg, i = heapq.heappop(heap)
        # Rewriting never shortens a sentence ("I" becomes a name), so its clean text bounds its cost.
        if used + len(by_index[i].clean) + len(separator) > budget_chars:
            continue
        if i not in rendered:
            rendered[i] = render(by_index[i])
        cost = len(rendered[i]) + len(separator)
        if used + cost > budget_chars:
            continue  # does not fit; a shorter sentence still may
        fresh = score(i)
        if heap and fresh < -heap[0][0] - 1e-12:
            heapq.heappush(heap, (-fresh, i))  # stale score: re-queue and look again
            continue
        chosen.append(i)
        used += cost
        for s in stems[i]:
            prob[s] *= k.REDUNDANCY_DECAY
    if in_order:
        chosen.sort()
    return [(by_index[i], rendered[i]) for i in chosen]


def date_prefix(units: Sequence[Unit]) -> str:
    stamps = sorted({u.ts_us for u in units if u.ts_us})
    if not stamps:
        return ""
    first, last = iso(stamps[0])[:10], iso(stamps[-1])[:10]
    return f"[{first}] " if first == last else f"[{first} – {last}] "


def summary_text(units: Sequence[Unit], budget_tokens: int, *, weight: Callable[[Unit], float] | None = None) -> tuple[str, list[Unit]]:
    """An extractive summary of `units` of at most `budget_tokens` (engram's token estimate).

    Returns the text and the units it carries. If not even one sentence fits, the best sentence
    is cut at a word boundary: the budget is a hard limit.
    """
    budget_chars = budget_tokens * CHARS_PER_TOKEN
    prefix = date_prefix(units)
    picked = select(units, budget_chars - len(prefix), weight=weight)
    if not picked:
        best = select(units, 10**9, weight=weight, in_order=False)[:1] or [(u, render_unit(u)) for u in units[:1]]
        if not best:
            return "", []
        unit, text = best[0]
        return clip_words(prefix + text, budget_chars), [unit]
    return prefix + " ".join(text for _, text in picked), [u for u, _ in picked]

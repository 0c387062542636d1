"""Whether a newer memory contradicts or updates an older one (a lexical rule; no language model).

Two memories can only conflict when they are about the same subject: they share a named entity and
one of these holds:

- **correction**: the newer one is a correction (its fact category says so, or it reads like one: "actually",
  "no longer", "not anymore", "X, not Y", "changed my mind") and it either negates the shared subject
  ("not Lisbon", "no longer in Lisbon", "instead of Lisbon"; a named thing other than who is speaking, the
  name both open with) or restates the older one closely;
- **opposite polarity**: the two take opposite stances on the same thing ("loves" / "doesn't like"), and
  share most of their words (Jaccard >= SAME_SUBJECT_OVERLAP of their word stems);
- **different numbers**: the same statement with another number ("2 kids" / "3 kids"), worded more closely
  still (SAME_WORDING_OVERLAP);
- **changed state**: the same subject's single-valued attribute said again with another value, or its value ended
  ("works at Acme" / "quit my job at Acme, I work at Globex now"; "has a dog" / "adopted a second dog"; "lives in
  Lisbon" / "moved to Porto": `engram.memory.cognitive.slots`). Facts of different attributes coexist ("has a dog",
  "has a cat").

The direction is by event time, never by arrival: the newer memory is the one encoded later, so a
conversation imported after a later one is corrected the way it would have been live. Who wins is the
personality's call (`engram.memory.background.conflicts.resolve`); this only finds the conflict. Used by
auto-ingest at the turn (`engram.policies.auto_ingest`) and by consolidation for traces made otherwise.
"""

from __future__ import annotations

import functools
import re

from engram.memory.cognitive.memory import entity_key
from engram.memory.cognitive.model import MemoryTrace
from engram.memory.cognitive.slots import changed_state
from engram.providers.search.bm25 import tokenize

# Word-stem overlap (Jaccard) at which two statements are about the same thing (polarity and number checks).
SAME_SUBJECT_OVERLAP = 0.4
# ...and closely worded enough that a different number is a different answer to the same question.
SAME_WORDING_OVERLAP = 0.6
CORRECTION_CATEGORY = "correction"

_CORRECTION = re.compile(
    r"\b(?:actually|I meant|correction|to clarify|I was wrong|that['’]s (?:wrong|not right)|not true|scratch that|"
    r"no longer|not anymore|any ?more|changed (?:my|our) mind|instead of|rather than|I misspoke|"
    r"sorry,? I (?:meant|said))\b|,\s*not\s+\w",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(?:not|no|never|no longer|anymore|nor)\b|n['’]t\b", re.IGNORECASE)
_POSITIVE = re.compile(r"\b(?:love[sd]?|like[sd]?|enjoy(?:s|ed)?|prefer(?:s|red)?|adore[sd]?|want(?:s|ed)?)\b", re.IGNORECASE)
_NEGATIVE = re.compile(r"\b(?:hate[sd]?|dislike[sd]?|can['’]t stand|detest[sd]?)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w])")
_MONTHS_AND_DAYS = frozenset(
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)


@functools.lru_cache(maxsize=16_384)
def reads_as_correction(text: str) -> bool:
    """Whether `text` reads like a correction ("actually", "no longer", "X, not Y", ...). Kept per text, as `_words`
    and `slots` are: `contradiction` asks it of the newer memory of every pair, and consolidation compares a new
    trace with every active trace naming its entities (in one agent's conversation, most of them share the
    speaker's name); the search was a twelfth of the consolidation actor's CPU during an ingest (bench/ingest.py)."""
    return _CORRECTION.search(text) is not None


@functools.lru_cache(maxsize=16_384)
def polarity(text: str) -> int:
    """+1 for a positive stance ("loves"), -1 for a negative one ("hates", "doesn't like"), 0 for none."""
    negated = bool(_NEGATION.search(text))
    sign = -1 if _NEGATIVE.search(text) else (1 if _POSITIVE.search(text) else 0)
    if not (sign or negated):
        return 0
    return (sign or 1) * (-1 if negated else 1)


def _speaker(text: str) -> str:
    """Who a memory's text opens with ("Caroline: ..." or "User lives ..."): the speaker, not the subject."""
    head = text.split(":", 1)[0] if ":" in text[:40] else text.split(" ", 1)[0]
    return entity_key(head.removesuffix("'s").removesuffix("’s"))


def speaker_key(text: str) -> str:
    """The entity key of who a memory's text opens with (its speaker)."""
    return _speaker(text)


def subjects(t: MemoryTrace) -> set[str]:
    """The named things a memory is about: its entities less dates, numbers and its speaker."""
    speaker = _speaker(t.content)
    out = set()
    for e in t.entities:
        key = entity_key(e)
        if not key or key == speaker or key in _MONTHS_AND_DAYS or not any(c.isalpha() for c in key) or not e[:1].isupper():
            continue
        out.add(key)
    return out


@functools.lru_cache(maxsize=16_384)
def _words(text: str) -> frozenset[str]:
    """The word stems of a memory's text (asked again for each pair it is compared in: kept)."""
    return frozenset(tokenize(text))


def _overlap(a: str, b: str) -> float:
    x, y = _words(a), _words(b)
    return len(x & y) / len(x | y) if x and y else 0.0


def negates(text: str, subject: str) -> bool:
    """Whether `text` denies `subject` ("not Lisbon", "no longer in Lisbon", "instead of Lisbon")."""
    pattern = rf"\b(?:not|never|no longer|instead of|rather than)\b[^.;!?]{{0,24}}?\b{re.escape(subject)}\b"
    return re.search(pattern, " ".join(text.lower().split())) is not None


def contradiction(older: MemoryTrace, newer: MemoryTrace) -> str | None:
    """Why `newer` contradicts or updates `older` ("correction", "opposite polarity", "different numbers", "changed
    state"), or None."""
    if older.trace_id == newer.trace_id:
        return None
    named = {entity_key(e) for e in older.entities} & {entity_key(e) for e in newer.entities}
    if not named:
        return None  # no name in common: not provably the same subject
    overlap = _overlap(older.content, newer.content)
    if newer.category == CORRECTION_CATEGORY or reads_as_correction(newer.content):
        shared = subjects(older) & subjects(newer)
        if overlap >= SAME_SUBJECT_OVERLAP or any(negates(newer.content, s) and not negates(older.content, s) for s in shared):
            return "correction"
    if changed_state(older.content, newer.content):
        return "changed state"
    if overlap < SAME_SUBJECT_OVERLAP:
        return None
    p, q = polarity(older.content), polarity(newer.content)
    if p and q and p != q:
        return "opposite polarity"
    a, b = set(_NUMBER.findall(older.content)), set(_NUMBER.findall(newer.content))
    if a and b and a != b and overlap >= SAME_WORDING_OVERLAP:
        return "different numbers"
    return None

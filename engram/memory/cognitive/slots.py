"""The subject/attribute slots of a fact: who it is about, what it says of them, and the value (a lexical rule).

A single-valued attribute of one subject has one value at a time: where someone works ("works at Acme", "quit my job
at Acme"), what their job is ("works as a banker", "lost my job as a banker"), where they live ("lives in Lisbon",
"moved to Porto"), how many of a thing they have ("has a dog", "adopted a second dog"). A later statement of another
value of the same slot, or one that ends the value ("quit", "left", "lost", "moved out of"), is a change of state:
the older fact stops being true when the later one is said (`engram.memory.cognitive.corrections.contradiction`).
Facts of different slots coexist ("has a dog" and "has a cat": two attributes); so do facts of different subjects
("my sister lives in Porto", "my brother lives in Lisbon").

The subject is the words before the verb in its clause ("User", "my sister"); "I" and "we" are the fact's speaker
(the name it opens with). Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_NAME = r"(?P<value>[A-Z][\w&'’-]*(?:\s+(?:of\s+|&\s+)?[A-Z][\w&'’-]*){0,4})"
_ROLE = r"an?\s+(?P<value>[a-z]+(?:\s+[a-z]+)?)"
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "second": 2, "three": 3, "third": 3, "four": 4, "fourth": 4,
           "five": 5, "fifth": 5}
_COUNT = (r"(?P<count>(?:a|our|my|his|her|their)\s+(?:second|third|fourth|fifth)|a|an|one|two|three|four|five|\d+)"
          r"\s+(?P<value>[a-z]{3,}?)s?\b")


@dataclass(frozen=True)
class Slot:
    subject: str  # who the fact is about, lower case ("user", "my sister")
    attribute: str  # employer | job | residence | number of <thing>
    value: str  # lower case
    holds: bool  # False: the statement ends this value ("quit my job at Acme")


# (attribute, holds, pattern); the patterns that end a value are matched first, and a value they cover is not also
# read as holding ("lost my job as a banker" is not "job as a banker").
_PATTERNS = (
    ("employer", False, rf"\b(?:quit|left|leaving|lost|resigned from|fired from|laid off from)\b[^.;!?,]{{0,24}}?"
                        rf"\b(?:at|from|with)\s+{_NAME}"),
    ("job", False, rf"\b(?:quit|left|lost|leaving)\s+\S+\s+job\s+as\s+{_ROLE}"),
    ("residence", False, rf"\bmoved\s+(?:out\s+of|away\s+from)\s+{_NAME}"),
    ("employer", True, rf"\b(?:works?|working|job|position|employed|hired)\b[^.;!?,]{{0,16}}?\b(?:at|for|with|by)\s+{_NAME}"),
    ("job", True, rf"\b(?:works?\s+as|working\s+as|job\s+as|position\s+as)\s+{_ROLE}"),
    ("residence", True, rf"\b(?:lives?|living|moved|moving|relocated)\s+(?:back\s+)?(?:in|to)\s+{_NAME}"),
    ("number", True, rf"\b(?:have|has|own|owns|adopted|adopt)\s+{_COUNT}"),
)
_COMPILED = tuple((attribute, holds, re.compile(p)) for attribute, holds, p in _PATTERNS)
_PAST = re.compile(r"\b(?:used to|previously|formerly|once)\s+\S*\s*$", re.IGNORECASE)
_FIRST_PERSON = frozenset({"i", "we", "i'm", "i’m", "we're", "we’re", "me", "my", "our"})
_CLAUSE = re.compile(r"[,;:]|\band\b|\bbut\b|\bso\b")


def _speaker(text: str) -> str:
    head = text.split(":", 1)[0] if ":" in text[:40] else text.split(" ", 1)[0]
    return head.strip().lower().removesuffix("'s").removesuffix("’s")


def _subject(text: str, start: int, speaker: str) -> str:
    """The words before `start` in their clause (at most three), "I"/"we" read as the speaker."""
    before = _CLAUSE.split(text[:start])[-1].split()
    words = [w.lower().strip("\"'()") for w in before[-3:]]
    words = [w for w in words if w not in ("now", "also", "still", "just", "recently", "finally", "then")]
    if not words or words[-1] in _FIRST_PERSON or words[0] in ("i", "we"):
        return speaker
    return " ".join(words)


@functools.lru_cache(maxsize=16_384)
def slots(text: str) -> tuple[Slot, ...]:
    """The slots `text` states, in order of the patterns (those ending a value first)."""
    speaker = _speaker(text)
    out: list[Slot] = []
    taken: list[tuple[int, int]] = []
    for attribute, holds, pattern in _COMPILED:
        for m in pattern.finditer(text):
            span = m.span("value")
            if any(a < span[1] and span[0] < b for a, b in taken) or _PAST.search(text[:m.start()]):
                continue
            value, attr = m.group("value").lower().strip(), attribute
            if attribute == "number":
                count = m.group("count").lower().split()[-1]
                attr, value = f"number of {value.removesuffix('s')}", str(_COUNTS.get(count, count))
            out.append(Slot(_subject(text, m.start(), speaker), attr, value, holds))
            taken.append(span)
    return tuple(out)


def changed_state(older: str, newer: str) -> bool:
    """Whether `newer` (said later) ends a value `older` says holds: the same subject and attribute with another value
    (and not the old one as well), or the old value ended."""
    then, now = slots(older), slots(newer)
    for a in then:
        if not a.holds:
            continue
        same = [b for b in now if (b.subject, b.attribute) == (a.subject, a.attribute)]
        if any(not b.holds and b.value == a.value for b in same):
            return True
        if any(b.holds and b.value != a.value for b in same) and not any(b.holds and b.value == a.value for b in same):
            return True
    return False

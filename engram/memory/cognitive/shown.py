"""What a recalled memory shows in a prompt: the same evidence in fewer tokens (issue 24).

A recall returns whole traces (`RecallHit.content`, `context`); a prompt shows `RecallHit.shown`, made here from the
ranked hits and the query:

- the best SHOWN_WHOLE_HITS hits whole; the others' content, when longer than SHOWN_SNIPPET_WORDS words, as a query
  snippet: its sentences ranked by how many of the query's stems they hold (ties: more stems of their own, earlier),
  the best kept, further ones only when they hold a query stem and fit; the speaker's prefix and a schema's
  "(recurring across N memories: …)" kept; " …" marks the cut;
- a reply's context (the question it answers) cut to its speaker and last question, at most SHOWN_CONTEXT_WORDS words:
  what links the reply to the question;
- a sentence (of four words or more) that a better hit already shows is left out of a later one.

The hit's provenance does not change (its source and context messages are still what it stands for; a sentence left
out is shown by a better hit). Measured on LoCoMo dev (the plan of issue 24, leave-one-conversation-out): tokens@10
437 → 334.5, every conversation ≤ 350 (335 / 315 / 345), no evidence id lost; the share of the gold answer's words still
in the top 10 63.2 → 60.8. Pure: text in, text out.
"""

from __future__ import annotations

import re
from typing import Sequence

from engram.config import defaults as d
from engram.memory.cognitive.indexing import SPEAKER_PREFIX
from engram.providers.search.bm25 import tokenize

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SCHEMA = re.compile(r" \(recurring across \d+ memories:[^)]*\)$")
_WORDS = re.compile(r"\w+")
# A sentence this short ("Thanks!", "Yes, it was.") is never treated as a repeat: it carries no evidence of its own.
_REPEAT_MIN_WORDS = 4


def shown_texts(hits: Sequence[tuple[str, str]], query: str, *, whole: int = d.SHOWN_WHOLE_HITS,
                snippet_words: int = d.SHOWN_SNIPPET_WORDS, context_words: int = d.SHOWN_CONTEXT_WORDS) -> list[str]:
    """The text each hit shows, best first: `hits` are (content, context) in rank order."""
    terms = set(tokenize(query))
    texts = []
    for rank, (content, context) in enumerate(hits):
        body = content if rank < whole else snippet(content, terms, snippet_words)
        ctx = last_question(context, context_words) if context.strip() else ""
        texts.append(f"{ctx}\n{body}" if ctx else body)
    return without_repeats(texts)


def snippet(content: str, terms: set[str], words: int) -> str:
    """`content` cut to its sentences that share the most of `terms` (stems), at most `words` words (the best
    sentence is kept whole even when longer); unchanged when it is no longer than `words`."""
    if len(content.split()) <= words:
        return content
    m = SPEAKER_PREFIX.match(content)
    prefix = m.group(0) if m else ""
    body = content[len(prefix):]
    s = _SCHEMA.search(body)
    suffix = s.group(0) if s else ""
    body = body[: len(body) - len(suffix)]
    sentences = [x for x in _SENTENCE.split(body) if x.strip()]
    stems = [set(tokenize(x)) for x in sentences]
    order = sorted(range(len(sentences)), key=lambda i: (-len(stems[i] & terms), -len(stems[i]), i))
    keep: list[int] = []
    n = 0
    for i in order:
        w = len(sentences[i].split())
        if keep and (n + w > words or not stems[i] & terms):
            continue
        keep.append(i)
        n += w
        if n >= words:
            break
    text = " ".join(sentences[i] for i in sorted(keep))
    if len(keep) < len(sentences):
        text += " …"
    return prefix + text + suffix


def last_question(context: str, words: int) -> str:
    """A reply's context as its speaker and last question, at most `words` words (the question the reply answers)."""
    who, sep, text = context.strip().partition(": ")
    if not sep:
        who, text = "", context.strip()
    sentences = [x for x in _SENTENCE.split(text) if x.strip()]
    last = sentences[-1] if sentences else text
    ws = last.split()
    if len(ws) > words:
        last = " ".join(ws[:words]) + "…"
    return f"{who}: {last}" if who else last


def without_repeats(texts: Sequence[str]) -> list[str]:
    """Each sentence shown once: one that an earlier text shows (same words, case aside) is left out of a later one."""
    seen: set[str] = set()
    out = []
    for text in texts:
        lines = []
        for line in text.split("\n"):
            m = SPEAKER_PREFIX.match(line)
            prefix = m.group(0) if m else ""
            kept = []
            for sentence in _SENTENCE.split(line[len(prefix):]):
                key = " ".join(_WORDS.findall(sentence.lower()))
                if key in seen and len(key.split()) >= _REPEAT_MIN_WORDS:
                    continue
                if key:
                    seen.add(key)
                kept.append(sentence)
            if kept:
                lines.append(prefix + " ".join(kept))
        out.append("\n".join(lines))
    return out

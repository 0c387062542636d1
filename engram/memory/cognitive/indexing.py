"""What finds a trace: the text its embedding and its keyword entry are made of.

    index text (keyword entry) = context, then content, then "(<day it was encoded>)"
    vector (embedding)         = the normalised sum of the content's embedding and the context's
                                 (`vector_parts`, `combine`); the content's alone without a context

- **content**: the memory itself — what recall returns and a prompt shows. The index text only
  decides what finds it; the trace's content, tokens and provenance do not change.
- **context** (`TraceEncoded.context`): for a trace made from a reply, the question it answers —
  the previous message of the discussion, when another speaker wrote it, cut to its sentences that
  end with "?" (`reply_context`). A reply is elliptical ("Yes! Last weekend, with the kids."):
  without the question it answers, neither an embedding nor a keyword index knows what it is about,
  and people later ask about it in the question's words ("when did she go camping?"). Only the
  question sentences are kept, so a reply does not also stand for everything else the previous
  message said (that message has its own traces).
- **date**: the day the trace was encoded, in event time (UTC), e.g. "(8 May 2023)": people ask
  about memories by when they happened ("what did she do in May 2023?").

The day is in the keyword entry only: a date's words match exactly there, where in an embedding they
move the vector little, and a trace without a question is then embedded by its content alone — the
text auto-ingest embeds to deduplicate it — so it costs one embedding, shared by deduplication,
same-topic links, recall and clustering (the home's embedder computes a text once per model).

Computed from the event alone (content, context, event time), so every fold — the projection, the
reader, the policies, a replay — indexes the same text.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import numpy as np

from engram.config import defaults as d

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def day_of(ts_us: int) -> str:
    """'8 May 2023' for an event time (UTC)."""
    dt = datetime.fromtimestamp(ts_us / 1_000_000, tz=timezone.utc)
    return f"{dt.day} {dt:%B %Y}"


def index_text(content: str, context: str, encoded_us: int) -> str:
    """The text a trace is embedded and keyword-indexed by (see the module docstring)."""
    parts = [context.strip(), content.strip(), f"({day_of(encoded_us)})"]
    return "\n".join(p for p in parts if p)


def vector_text(content: str, context: str) -> str:
    """The text a trace is embedded by: the question it answers (a reply's context), then its content;
    without a question, the content itself, unchanged (see the module docstring)."""
    context = context.strip()
    return f"{context}\n{content.strip()}" if context else content


def vector_parts(content: str, context: str) -> tuple[str, ...]:
    """The texts whose embeddings make a trace's vector (`combine`): its content, and the question it answers
    when it has one. Each is a text embedded anyway or shared: auto-ingest embeds the content to deduplicate
    it, and the facts of one reply share its question, so a reply's trace costs no embedding of its own
    (the embedding of "question\ncontent", `vector_text`, was one more text per reply trace)."""
    context = context.strip()
    return (content, context) if context else (content,)


def combine(vectors: np.ndarray) -> np.ndarray:
    """A trace's vector from the embeddings of its `vector_parts` (rows): their normalised sum. Against the
    embedding of `vector_text` on LoCoMo dev's 844 reply traces: mean cosine 0.946 (10th percentile 0.922),
    where the content's embedding alone has 0.822 (0.709)."""
    if len(vectors) == 1:
        return np.asarray(vectors[0], dtype=np.float32)
    total = np.asarray(vectors, dtype=np.float32).sum(axis=0)
    return np.asarray(total / max(float(np.linalg.norm(total)), 1e-12), dtype=np.float32)


def reply_context(previous: tuple[str, str] | None, speaker: str) -> str:
    """The question a message by `speaker` answers: `previous` = (speaker, text) of the message before it.

    Empty when there is none, when the same speaker wrote both, or when the previous message asks nothing.
    """
    if previous is None:
        return ""
    who, text = previous
    if who == speaker:
        return ""
    questions = [s.strip() for s in _SENTENCE_END.split(" ".join(text.split())) if s.strip().endswith("?")]
    if not questions:
        return ""
    return f"{who}: {' '.join(questions)}"[: d.REPLY_CONTEXT_MAX_CHARS]


SPEAKER_PREFIX = re.compile(r"^[A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*)?: ")
_PHOTO = re.compile(r"\s*\[shares a photo:[^\]]*\]")


def asks(content: str) -> bool:
    """Whether a trace's content only asks: every sentence ends with "?" (the speaker's prefix and a shared photo's
    caption aside). Such a trace is a stored question, evidence of interest and not of a fact (retrieval weighs it
    by QUESTION_WEIGHT). A message that also states something ("Wow, that's cool! What happened?") does not only ask.
    A function of the content alone: every fold computes the same flag."""
    text = _PHOTO.sub("", SPEAKER_PREFIX.sub("", content.strip())).strip()
    sentences = [s for s in _SENTENCE_END.split(text) if s.strip()]
    return bool(sentences) and all(s.rstrip().endswith("?") for s in sentences)

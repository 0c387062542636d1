"""The one place cognitive memory touches the LLM layer (`engram.llm`).

- the auto-ingest table's reading shared with fact extraction (`engram.llm.focus.ingest_policy`);
- the emotional reading of a text (the offline PAD lexicon, `engram.llm.offline.sentiment.pad`):
  deterministic, and recorded in the TraceEncoded event it shapes, whichever provider extracts facts;
- chat lines for the memory tasks, in the speaker's own words (`own_words`).
"""

from __future__ import annotations

from engram.cognitive.encoding import Emotion
from engram.config.agent import Personality
from engram.events.envelope import Recorded


def ingest_policy(personality: Personality, importance_threshold: float, max_per_turn: int):
    from engram.llm.focus import ingest_policy as policy, traits

    return policy(traits(personality), importance_threshold, max_per_turn)


def emotion(text: str) -> Emotion:
    from engram.llm.offline.sentiment import pad

    p = pad(text)
    if not p.hits:
        return Emotion()
    return Emotion(valence=p.valence, arousal=p.arousal, dominance=p.dominance, intensity=p.intensity)


def own_words(role: str, text: str) -> str:
    """What a message says in its speaker's own words: what the memory tasks may take as new information.

    Provenance (issue 12): the assistant quoting memory — recall results, summaries, the offline responder's
    labelled quotes — says nothing new. A reply from the offline responder is nothing but such quotes under
    its label ("[offline heuristic, not a language model] The memories most relevant ...:" and bullets), so
    none of it is the assistant's own; any other text is kept whole (auto-ingest also drops an assistant's
    fact that restates an existing memory, `engram.cognitive.ingest`). Other roles speak for themselves.
    """
    from engram.llm.offline.respond import TAG

    if role == "assistant" and text.lstrip().startswith(TAG):
        return ""
    return text


def chat_line(rec: Recorded, *, own: bool = True):
    """The message as the memory tasks see it: with `own`, the speaker's own words (see `own_words`, possibly
    empty); without, as it was written (what the conversation showed, e.g. for compaction)."""
    from engram.llm.types import ChatLine

    e = rec.event
    content = own_words(e.role, e.content) if own else e.content
    return ChatLine(role=e.role, content=content, seq=rec.seq, ts_us=rec.ts_us, message_id=e.message_id, name=e.name)

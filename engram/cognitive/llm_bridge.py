"""The one place cognitive memory touches the LLM layer (`engram.llm`).

- the auto-ingest table's reading shared with fact extraction (`engram.llm.focus.ingest_policy`);
- the emotional reading of a text (the offline PAD lexicon, `engram.llm.offline.sentiment.pad`):
  deterministic, and recorded in the TraceEncoded event it shapes, whichever provider extracts facts;
- chat lines for the memory tasks.
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


def chat_line(rec: Recorded):
    from engram.llm.types import ChatLine

    e = rec.event
    return ChatLine(role=e.role, content=e.content, seq=rec.seq, ts_us=rec.ts_us, message_id=e.message_id, name=e.name)

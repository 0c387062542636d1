"""The one place cognitive memory touches the LLM layer (`engram.providers.llm`).

- the auto-ingest table's reading shared with fact extraction (`engram.providers.llm.focus.ingest_policy`);
- the emotional reading of a text (the offline PAD lexicon, `engram.providers.llm.offline.sentiment.pad`):
  deterministic, and recorded in the TraceEncoded event it shapes, whichever provider extracts facts;
- chat lines for the memory tasks, in the speaker's own words (`own_words`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engram.config.agent import Personality
from engram.events.envelope import Recorded
from engram.events.messages import MessageAppended
from engram.memory.cognitive.encoding import Emotion
# Provenance lives with the LLM layer, so that discussion memory applies the same rule (re-exported here).
from engram.providers.llm.provenance import (  # noqa: F401
    INJECTED_MEMORY_KEY as INJECTED_MEMORY_KEY, INJECTED_MEMORY_MAX_CHARS as INJECTED_MEMORY_MAX_CHARS,
    QUOTE_CONTAINMENT as QUOTE_CONTAINMENT, QUOTE_MIN_WORDS as QUOTE_MIN_WORDS, injected_memory as injected_memory,
    own_words as own_words, quotes_memory as quotes_memory, record_injected as record_injected,
)

if TYPE_CHECKING:
    from engram.providers.llm.focus import IngestPolicy
    from engram.providers.llm.types import ChatLine


def ingest_policy(personality: Personality, importance_threshold: float, max_per_turn: int) -> IngestPolicy:
    from engram.providers.llm.focus import ingest_policy as policy, traits

    return policy(traits(personality), importance_threshold, max_per_turn)


def emotion(text: str) -> Emotion:
    from engram.providers.llm.offline.sentiment import pad

    p = pad(text)
    if not p.hits:
        return Emotion()
    return Emotion(valence=p.valence, arousal=p.arousal, dominance=p.dominance, intensity=p.intensity)


def chat_line(rec: Recorded, *, own: bool = True) -> ChatLine:
    """The message as the memory tasks see it: with `own`, the speaker's own words (see `own_words`, possibly
    empty); without, as it was written (what the conversation showed, e.g. for compaction)."""
    from engram.providers.llm.types import ChatLine

    e = rec.event
    assert isinstance(e, MessageAppended), rec.type
    content = own_words(e.role, e.content, injected_memory(e.metadata)) if own else e.content
    return ChatLine(role=e.role, content=content, seq=rec.seq, ts_us=rec.ts_us, message_id=e.message_id, name=e.name)

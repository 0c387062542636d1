"""Sentiment tracking: an emotional agent's mood follows the conversation.

Wunderland: "Emotionality > 0.6: enable sentiment tracking". For such an agent, a user message
with emotional words (intensity >= MOOD_TRACKING_MIN_INTENSITY) moves the mood toward the
message's PAD: mood' = mood + MOOD_CONTAGION · (message − mood). Each move is a `MoodChanged`
on `agent:<agent>`. `engram mood set` records explicit moods the same way.
"""

from __future__ import annotations

from engram.config import defaults as d
from engram.events.cognitive import MoodChanged
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import MessageAppended
from engram.kernel.ids import agent_stream
from engram.memory.cognitive import llm_bridge
from engram.memory.cognitive.ingest import ingest_rules
from engram.memory.cognitive.personality import Pad
from engram.policies.cognitive_base import CognitivePolicy


def _clamp(x: float) -> float:
    return round(max(-1.0, min(1.0, x)), 6)


def tracked(mood: Pad, message: Pad) -> Pad:
    """mood + MOOD_CONTAGION · (message − mood), per dimension."""
    k = d.MOOD_CONTAGION
    return Pad(
        _clamp(mood.valence + k * (message.valence - mood.valence)),
        _clamp(mood.arousal + k * (message.arousal - mood.arousal)),
        _clamp(mood.dominance + k * (message.dominance - mood.dominance)),
    )


class MoodTracker(CognitivePolicy):
    name = "mood-tracker"
    interests = frozenset({"MessageAppended", "MoodChanged", "SettingsChanged", "AgentForgotten"})

    def __init__(self, ctx):
        super().__init__(ctx)
        self.moods: dict[str, Pad] = {}

    def current(self, agent: str) -> Pad:
        return self.moods.get(agent) or Pad.of(self.config_of(agent).mood)

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes = []
        for rec in batch:
            e = rec.event
            if rec.type == "SettingsChanged":
                self.settings.apply(rec)
            elif not self.owns(rec.agent):
                continue
            elif isinstance(e, MoodChanged):
                self.moods[rec.agent] = Pad(e.valence, e.arousal, e.dominance)
            elif rec.type == "AgentForgotten":
                self.moods.pop(rec.agent, None)
            elif isinstance(e, MessageAppended) and e.role == "user":
                if not ingest_rules(self.config_of(rec.agent)).sentiment_tracking:
                    continue
                felt = llm_bridge.emotion(e.content)
                if felt.intensity < d.MOOD_TRACKING_MIN_INTENSITY:
                    continue
                mood = tracked(self.current(rec.agent), felt.pad)
                self.moods[rec.agent] = mood
                event = MoodChanged(
                    valence=mood.valence, arousal=mood.arousal, dominance=mood.dominance,
                    reason=f"sentiment of message {e.message_id}",
                )
                writes.append(
                    Write(
                        stream=agent_stream(rec.agent),
                        agent=rec.agent,
                        events=(NewEvent(event=event, ts_us=rec.ts_us, event_id=f"mood:{rec.seq}", causation=rec.seq),),
                    )
                )
        return writes

    def state(self):
        return {"base": super().state(), "moods": self.moods}

    def restore(self, state) -> None:
        if state:
            super().restore(state["base"])
            self.moods = state["moods"]

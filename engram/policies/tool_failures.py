"""The tool-failure learner: a `ToolCallFailed` that matches one of the six patterns becomes a lesson.

The lesson is a procedural, agent-scoped trace (so later recalls in any discussion surface it),
encoded once per (discussion, pattern, tool): a repeated failure in the same discussion adds nothing.
Appended to the failure's stream: `LessonLearned` and the lesson's `TraceEncoded`.
"""

from __future__ import annotations

from engram.config import defaults as d
from engram.events.cognitive import LessonLearned, MoodChanged
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import ToolCallFailed
from engram.memory.cognitive import tool_failures
from engram.memory.cognitive.encoding import encode, trace_id
from engram.policies.cognitive_base import CognitivePolicy

# A lesson matters: it should surface before small talk does.
LESSON_IMPORTANCE = 0.8


class ToolFailureLearner(CognitivePolicy):
    name = "tool-failure-learner"
    interests = frozenset({"ToolCallFailed", "SettingsChanged", "MoodChanged"})

    def __init__(self, ctx):
        super().__init__(ctx)
        self.learned: set[tuple[str, str, str]] = set()  # (discussion, pattern, tool)
        self.moods: dict = {}

    def handle(self, batch: list[Recorded]) -> list[Write]:
        writes = []
        for rec in batch:
            if rec.type == "SettingsChanged":
                self.settings.apply(rec)
                continue
            if not self.owns(rec.agent):
                continue
            if isinstance(rec.event, MoodChanged):
                self.moods[rec.agent] = rec.event
            elif isinstance(rec.event, ToolCallFailed):
                write = self._failure(rec, rec.event)
                if write is not None:
                    writes.append(write)
        return writes

    def _failure(self, rec: Recorded, e: ToolCallFailed) -> Write | None:
        lesson = tool_failures.match(e.tool, e.error)
        if lesson is None:
            return None
        key = tool_failures.dedup_key(rec.stream, lesson)
        if key in self.learned:
            return None
        self.learned.add(key)
        agent = rec.agent
        tid = trace_id(agent, "lesson", *key)
        cfg = self.config_of(agent)
        mood = self.moods.get(agent)
        from engram.memory.cognitive.personality import Pad

        trace = encode(
            trace_id=tid,
            content=lesson.text,
            config=cfg,
            mood=Pad(mood.valence, mood.arousal, mood.dominance) if mood else Pad.of(cfg.mood),
            scope="agent",
            scope_id=agent,
            source_type="tool_result",
            source_seqs=(rec.seq,),
            source_message_ids=(e.call_id,) if e.call_id else (),
            trace_type="procedural",
            category="lesson",
            importance=LESSON_IMPORTANCE,
            confidence=d.TOOL_RESULT_CONFIDENCE,
            entities=(e.tool,) if e.tool else (),
            tags=("lesson", lesson.pattern, e.tool),
        )
        learned = LessonLearned(pattern=lesson.pattern, lesson=lesson.text, tool=e.tool, trace_id=tid, source_seq=rec.seq)
        events = (
            NewEvent(event=learned, ts_us=rec.ts_us, event_id=f"lesson:{tid}", causation=rec.seq),
            NewEvent(event=trace, ts_us=rec.ts_us, event_id=f"trace:{tid}", causation=rec.seq),
        )
        return Write(stream=rec.stream, agent=agent, events=events)

    def state(self):
        return {"base": super().state(), "learned": self.learned, "moods": self.moods}

    def restore(self, state) -> None:
        if state:
            super().restore(state["base"])
            self.learned = state["learned"]
            self.moods = state["moods"]

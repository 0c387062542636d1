"""The Observer: dated observation notes from the conversation, observed in the background.

One logical actor per observation log (per discussion by default, or per agent with
`memory.observer.scope: "agent"`), placed on the pool by agent. Every observed message goes into
its log's buffer (`engram.memory.background.observer`):

- every `bufferTokens` (6,000) unobserved tokens, the `observe` memory task (personality-focused:
  the agent's HEXACO traits come from its settings) turns them into notes, recorded at once as
  `ObservationsRecorded(buffered=True)` in the observed discussion's stream;
- when the tokens not yet in the log exceed `activationTokens` (30,000), `ObservationsActivated`
  lets the buffered notes join the observation log: nothing is observed at that moment, so crossing
  the threshold costs one small event, and nothing is observed twice.

Events carry the event time of the message that caused them and deterministic ids; they are appended
as soon as they are decided (`PolicyContext.append`), so notes of a long import are visible early.
"""

from __future__ import annotations

from typing import Any

import msgspec

from engram.config.agent import AgentConfig
from engram.config.recorded import SCOPE_AGENT
from engram.events.background import ObservationsActivated, ObservationsRecorded
from engram.events.control import AgentForgotten, DiscussionForgotten, SettingsChanged
from engram.events.envelope import NewEvent, Recorded, Write
from engram.events.messages import CONVERSATION_ROLES, MessageAppended
from engram.kernel.ids import agent_stream
from engram.memory.background import observer as core
from engram.memory.background.observation_log import LogKey, note_tokens
from engram.memory.cognitive.llm_bridge import chat_line
from engram.policies.background_base import BackgroundPolicy
from engram.policies.base import PolicyContext


class Observer(BackgroundPolicy):
    name = "observer"
    interests = frozenset({"MessageAppended", "SettingsChanged", "DiscussionForgotten", "AgentForgotten"})

    def __init__(self, ctx: PolicyContext):
        super().__init__(ctx)
        self.buffers: dict[LogKey, core.Buffer] = {}
        # What each buffered increment yielded (stream, first seq, last seq) -> (notes, note tokens).
        self.yields: dict[tuple[str, int, int], tuple[int, int]] = {}
        self._out: list[Write] = []

    # ------------------------------------------------------------------ handling

    def handle(self, batch: list[Recorded]) -> list[Write]:
        for rec in batch:
            e = rec.event
            if isinstance(e, SettingsChanged):
                self.settings.apply(rec)
                if rec.stream.startswith("agent:") and e.scope == SCOPE_AGENT and self.owns(rec.agent):
                    self._settings_changed(rec)
            elif isinstance(e, DiscussionForgotten):
                for key, buf in list(self.buffers.items()):
                    if key[0] == rec.agent:
                        core.forget_stream(buf, e.discussion_id)
                        if key[1] == "discussion" and key[2] == e.discussion_id:
                            del self.buffers[key]
                self.yields = {k: v for k, v in self.yields.items() if k[0] != e.discussion_id}
            elif isinstance(e, AgentForgotten):
                streams = {p.stream for k, b in self.buffers.items() if k[0] == e.agent_id for p in b.pending}
                streams |= {i.stream for k, b in self.buffers.items() if k[0] == e.agent_id for i in b.increments}
                self.buffers = {k: b for k, b in self.buffers.items() if k[0] != e.agent_id}
                self.yields = {k: v for k, v in self.yields.items() if k[0] not in streams}
                self.forget_agent(e.agent_id)
            elif isinstance(e, MessageAppended) and self.owns(rec.agent):
                self._message(rec, e)
        out, self._out = self._out, []
        return out

    def _key(self, agent: str, stream: str, cfg: AgentConfig) -> LogKey:
        scope = cfg.memory.observer.scope
        return (agent, scope, stream if scope == "discussion" else agent)

    def _message(self, rec: Recorded, msg: MessageAppended) -> None:
        if msg.role not in CONVERSATION_ROLES or not msg.content.strip():
            return
        cfg = self.config_of(rec.agent)
        if not cfg.memory.observer.enabled:
            return
        line = chat_line(rec)
        if not line.content.strip():
            return  # the assistant quoting memory (provenance): nothing of its own to observe
        key = self._key(rec.agent, rec.stream, cfg)
        buf = self.buffers.setdefault(key, core.Buffer(key))
        steps = core.add_message(buf, rec.stream, line, msg.token_estimate, cfg.memory.observer)
        self._run(steps, rec, cfg)

    def _settings_changed(self, rec: Recorded) -> None:
        """New settings may move the threshold, or the scope: look at the agent's buffers again."""
        cfg = self.config_of(rec.agent)
        if not cfg.memory.observer.enabled:
            return
        for key in sorted(k for k in self.buffers if k[0] == rec.agent):
            buf = self.buffers[key]
            if key[1] != cfg.memory.observer.scope and buf.pending:
                # The scope changed: unobserved messages move to the logs of the new scope.
                for p in buf.pending:
                    target = self._key(rec.agent, p.stream, cfg)
                    self.buffers.setdefault(target, core.Buffer(target)).pending.append(p)
                buf.pending = []
        for key in sorted(k for k in self.buffers if k[0] == rec.agent and k[1] == cfg.memory.observer.scope):
            self._run(core.check(self.buffers[key], cfg.memory.observer), rec, cfg)

    # ------------------------------------------------------------------ acting

    def _run(self, steps: list[core.Step], cause: Recorded, cfg: AgentConfig) -> None:
        for step in steps:
            if isinstance(step, core.Observe):
                self._observe(step, cause, cfg)
            else:
                self._activate(step, cause)

    def _observe(self, step: core.Observe, cause: Recorded, cfg: AgentConfig) -> None:
        agent, scope, scope_id = step.key
        result = self.tasks.observe(step.lines, personality=cfg.personality)
        message_id = {line.seq: line.message_id for line in step.lines}
        notes = tuple(
            msgspec.structs.replace(n, source_message_ids=tuple(message_id.get(s, "") for s in n.source_seqs))
            for n in result.value
        )
        out_tokens = sum(note_tokens(n) for n in notes)
        event = ObservationsRecorded(
            notes=notes, first_seq=step.first_seq, last_seq=step.last_seq, input_tokens=step.tokens,
            output_tokens=out_tokens, buffered=step.buffered, llm=result.llm, scope=scope, scope_id=scope_id,
            messages=len(step.lines),
        )
        if step.buffered:
            self.yields[(step.stream, step.first_seq, step.last_seq)] = (len(notes), out_tokens)
        # Caused by the last message it observes (same stream: forgetting another discussion leaves it).
        self._emit(Write(step.stream, agent, (NewEvent(
            event=event, ts_us=step.lines[-1].ts_us, causation=step.last_seq,
            event_id=f"observe:{scope}:{scope_id}:{step.first_seq}:{step.last_seq}",
        ),)))

    def _activate(self, step: core.Activate, cause: Recorded) -> None:
        agent, scope, scope_id = step.key
        yields = [self.yields.pop((i.stream, i.first_seq, i.last_seq), (0, 0)) for i in step.increments]
        event = ObservationsActivated(
            through_seq=step.through_seq, scope=scope, scope_id=scope_id, threshold=step.threshold,
            unobserved_tokens=step.unobserved_tokens, increments=len(step.increments),
            note_count=sum(n for n, _ in yields), message_tokens=sum(i.tokens for i in step.increments),
            note_tokens=sum(t for _, t in yields),
        )
        discussion = scope == "discussion"
        # An agent-wide activation concerns several discussions: forgetting one of them must not undo it.
        self._emit(Write(scope_id if discussion else agent_stream(agent), agent, (NewEvent(
            event=event, ts_us=cause.ts_us, causation=cause.seq if discussion else None,
            event_id=f"activate:{scope}:{scope_id}:{step.through_seq}",
        ),)))

    def _emit(self, write: Write) -> None:
        if self.ctx.append is not None:
            self.ctx.append([write])  # at once: the notes are visible (and durable) while the batch goes on
        else:
            self._out.append(write)

    # ------------------------------------------------------------------ snapshots

    def state(self) -> Any:
        return {"settings": self.settings.state(), "buffers": self.buffers, "yields": self.yields}

    def restore(self, state: Any) -> None:
        if state:
            self.settings.restore(state["settings"])
            self.buffers = state["buffers"]
            self.yields = state["yields"]

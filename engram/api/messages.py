"""Writing: messages (one discussion, or several at once) and failed tool calls."""

from __future__ import annotations

from engram.api import types as t
from engram.api.clock import to_us
from engram.api.errors import ApiError
from engram.kernel.ids import validate_agent, validate_discussion


def incoming(messages: list[t.Message], *, max_ahead_s: float, where: str = ""):
    """The messages of a request as ingest takes them, their times checked (`to_us`: at most `max_ahead_s` ahead);
    a refusal names the message (after `where`, e.g. its discussion)."""
    from engram.memory.ingest.messages import IncomingMessage

    out = []
    for i, m in enumerate(messages):
        try:
            ts_us = to_us(m.ts, max_ahead_s=max_ahead_s)
        except ApiError as exc:
            label = (f"{where}: " if where else "") + f"message {i + 1}" + (f" ({m.message_id:.60})" if m.message_id else "")
            raise ApiError(exc.status, exc.code, f"{label}: {exc.message}") from None
        out.append(IncomingMessage(role=m.role, content=m.content, ts_us=ts_us, name=m.name, message_id=m.message_id,
                                   metadata=m.metadata))
    return out


class MessageOps:
    def append_messages(self, agent: str, discussion: str, req: t.AppendRequest) -> t.AppendResponse:
        """Append messages to one discussion (tags stripped, empties dropped, duplicates recognised by id)."""
        return self.append_conversations(agent, t.AppendConversationsRequest(
            conversations=[t.Conversation(discussion=validate_discussion(discussion), messages=req.messages)]))

    def append_conversations(self, agent: str, req: t.AppendConversationsRequest) -> t.AppendResponse:
        """Append the messages of several discussions of one agent: all of them commit, or none."""
        from engram.memory.ingest.messages import discussion_write

        validate_agent(agent)
        limit, ahead = self.config.limits.max_message_chars, self.config.limits.max_future_seconds
        writes, empty = [], []
        for conv in req.conversations:
            self.claim_discussion(agent, conv.discussion)
            where = f"discussion {conv.discussion}"
            write = discussion_write(agent, conv.discussion, incoming(conv.messages, max_ahead_s=ahead, where=where),
                                     max_message_chars=limit, where=where)
            (writes.append(write) if write else empty.append(conv.discussion))
        if not writes:
            return t.AppendResponse(agent=agent, results=[t.AppendResult(discussion=d, appended=0, duplicates=0, seqs=[])
                                                          for d in empty])
        first = min(e.ts_us for w in writes for e in w.events)
        recorded = self.sync_settings(agent, first)  # settings in force from the first message they govern
        results = self.rt.append(writes)
        self.note_streams(writes)
        out = [t.AppendResult(discussion=w.stream, appended=len(r.seqs) - r.duplicates, duplicates=r.duplicates,
                              seqs=list(r.seqs)) for w, r in zip(writes, results)]
        out += [t.AppendResult(discussion=d, appended=0, duplicates=0, seqs=[]) for d in empty]
        return t.AppendResponse(agent=agent, results=out, settings_recorded=recorded,
                                position=self.position(agent, [s for r in results for s in r.seqs]))

    def record_settings(self, agent: str) -> t.SettingsRecorded:
        """Record the agent's settings files (agent.config.json, the discussion settings) in the log if they
        changed; policies react to the recorded settings. Every write does this too."""
        validate_agent(agent)
        return t.SettingsRecorded(agent=agent, recorded=self.sync_settings(agent))

    def record_tool_failure(self, agent: str, discussion: str, req: t.ToolFailureRequest) -> t.EventResponse:
        """Record a failed tool call (the tool-failure learner turns known failures into lessons)."""
        from engram.events.envelope import NewEvent, Write
        from engram.events.messages import ToolCallFailed

        self.claim_discussion(agent, discussion)
        ts = to_us(req.ts, max_ahead_s=self.config.limits.max_future_seconds)
        self.sync_settings(agent, ts)
        event = ToolCallFailed(tool=req.tool, error=req.error, arguments=req.arguments, call_id=req.call_id)
        write = Write(discussion, agent, (NewEvent(event, ts, f"toolfail:{req.call_id}" if req.call_id else None),))
        appended = self.rt.append([write])[0]
        self.note_streams([write])
        return t.EventResponse(seq=appended.seqs[0], duplicate=bool(appended.duplicates),
                               position=self.position(agent, appended.seqs))

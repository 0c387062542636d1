"""Writing: messages (one discussion, or several at once) and failed tool calls."""

from __future__ import annotations

from engram.api import types as t
from engram.api.clock import to_us
from engram.api.errors import error
from engram.ids import validate_agent, validate_discussion


def incoming(messages: list[t.Message]):
    from engram.ingest.messages import IncomingMessage

    return [IncomingMessage(role=m.role, content=m.content, ts_us=to_us(m.ts), name=m.name,
                            message_id=m.message_id, metadata=m.metadata) for m in messages]


class MessageOps:
    def append_messages(self, agent: str, discussion: str, req: t.AppendRequest) -> t.AppendResponse:
        """Append messages to one discussion (tags stripped, empties dropped, duplicates recognised by id)."""
        return self.append_conversations(agent, t.AppendConversationsRequest(
            conversations=[t.Conversation(discussion=validate_discussion(discussion), messages=req.messages)]))

    def append_conversations(self, agent: str, req: t.AppendConversationsRequest) -> t.AppendResponse:
        """Append the messages of several discussions of one agent: all of them commit, or none."""
        from engram.ingest.messages import discussion_write

        validate_agent(agent)
        limit = self.config.limits.max_message_chars
        writes, empty = [], []
        for conv in req.conversations:
            self.claim_discussion(agent, conv.discussion)
            write = discussion_write(agent, conv.discussion, incoming(conv.messages), max_message_chars=limit,
                                     where=f"discussion {conv.discussion}")
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
        return t.AppendResponse(agent=agent, results=out, settings_recorded=recorded)

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
        ts = to_us(req.ts)
        self.sync_settings(agent, ts)
        event = ToolCallFailed(tool=req.tool, error=req.error, arguments=req.arguments, call_id=req.call_id)
        write = Write(discussion, agent, (NewEvent(event, ts, f"toolfail:{req.call_id}" if req.call_id else None),))
        appended = self.rt.append([write])[0]
        self.note_streams([write])
        return t.EventResponse(seq=appended.seqs[0], duplicate=bool(appended.duplicates))

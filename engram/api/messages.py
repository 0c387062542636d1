"""Writing: messages (one discussion, or several at once), an edit or removal of one message, failed tool calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple

from engram.api.core import ApiCore
from engram.api import types as t
from engram.api.clock import to_us
from engram.api.errors import ApiError, error
from engram.kernel.ids import validate_agent, validate_discussion

if TYPE_CHECKING:
    from engram.events.messages import MessageAppended, MessageEdited, MessageRemoved
    from engram.memory.ingest.messages import IncomingMessage


def incoming(messages: list[t.Message], *, max_ahead_s: float, where: str = "") -> list[IncomingMessage]:
    """The messages of a request as ingest takes them, their times checked (`to_us`: at most `max_ahead_s` ahead);
    a refusal names the message (after `where`, e.g. its discussion)."""
    from engram.memory.ingest.messages import IncomingMessage

    out: list[IncomingMessage] = []
    for i, m in enumerate(messages):
        try:
            ts_us = to_us(m.ts, max_ahead_s=max_ahead_s)
        except ApiError as exc:
            label = (f"{where}: " if where else "") + f"message {i + 1}" + (f" ({m.message_id:.60})" if m.message_id else "")
            raise ApiError(exc.status, exc.code, f"{label}: {exc.message}") from None
        out.append(IncomingMessage(role=m.role, content=m.content, ts_us=ts_us, name=m.name, message_id=m.message_id,
                                   metadata=m.metadata))
    return out


class LatestChange(NamedTuple):
    """A message's latest edit or removal: its seq, whether it was a removal (the message is removed now), its id."""

    seq: int
    removed: bool
    event_id: str | None


class MessageOps(ApiCore):
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

    # ------------------------------------------------------------------ one message at a time

    def edit_message(self, agent: str, discussion: str, message_id: str, req: t.MessageEdit) -> t.MessageChanged:
        """New words for one message of a discussion, recorded as `MessageEdited` (the old words stay in the log):
        chunk memories, the rolling summary, vector memories, facts and traces made from the old words are
        superseded by what the new words make (`engram.events.messages`)."""
        from engram.events.messages import MessageEdited, change_event_id
        from engram.kernel.ids import strip_discussion_tags
        from engram.kernel.tokens import estimate_tokens
        from engram.memory.ingest.history import message_key

        content = strip_discussion_tags(req.content)
        if not content:
            raise error("malformed_messages", "content is empty: delete the message instead")
        limit = self.config.limits.max_message_chars
        if len(content) > limit:
            raise error("malformed_messages", f"content of {len(content)} characters, over the limit of {limit}")
        message = self._current_message(agent, discussion, message_id)
        event = MessageEdited(message_id=message_id, role=message.role, content=content,
                              token_estimate=estimate_tokens(content), source="api")
        latest = self._message_changes(agent, discussion).get(message_id)
        event_id = change_event_id("edit", message_id, latest.seq if latest else None, message_key(message.role, content))
        if latest is not None and message.content == content:
            event_id = latest.event_id or event_id  # the same edit sent again: the log holds it already
        return self._message_change(agent, discussion, event, event_id, "edited", content)

    def remove_message(self, agent: str, discussion: str, message_id: str, reason: str = "") -> t.MessageChanged:
        """Take one message back, recorded as `MessageRemoved` (its words stay in the log for replay; forget the
        discussion to erase them): every memory made from it is superseded."""
        from engram.events.messages import MessageRemoved, change_event_id

        self._current_message(agent, discussion, message_id)
        event = MessageRemoved(message_id=message_id, source="api", reason=reason[:1000])
        latest = self._message_changes(agent, discussion).get(message_id)
        return self._message_change(agent, discussion, event, change_event_id(
            "removed", message_id, latest.seq if latest else None), "removed", None)

    def _message_changes(self, agent: str, discussion: str) -> dict[str, LatestChange]:
        """The latest change of each message of the discussion that was ever edited or removed, by message id."""
        from engram.events.messages import MessageEdited, MessageRemoved

        changes: dict[str, LatestChange] = {}
        for r in self.rt.read(agent, after=0, stream=discussion, types=["MessageEdited", "MessageRemoved"], limit=None):
            if isinstance(r.event, (MessageEdited, MessageRemoved)):
                changes[r.event.message_id] = LatestChange(r.seq, isinstance(r.event, MessageRemoved), r.event_id)
        return changes

    def _current_message(self, agent: str, discussion: str, message_id: str) -> MessageAppended:
        """The message as the conversation holds it now; 404 when the discussion has none of that id (or it was
        removed). Another agent's discussion is answered as one that does not exist."""
        from engram.events.messages import MESSAGE_TYPES, MessageAppended, conversation
        from engram.kernel.ids import validate_id

        self.discussion_agent(discussion, validate_agent(agent))
        validate_id(message_id, "message id")
        found = [r.event for r in conversation(self.rt.read(agent, after=0, stream=discussion,
                                                            types=list(MESSAGE_TYPES), limit=None))
                 if isinstance(r.event, MessageAppended) and r.event.message_id == message_id]
        if not found:
            raise error("not_found", f"discussion {discussion!r} has no message {message_id!r}")
        return found[0]

    def _message_change(self, agent: str, discussion: str, event: MessageEdited | MessageRemoved, event_id: str,
                        change: Literal["edited", "removed"], content: str | None) -> t.MessageChanged:
        from engram.api.clock import now_us
        from engram.events.envelope import NewEvent, Write

        ts = now_us()
        write = Write(stream=discussion, agent=agent, events=(NewEvent(event=event, ts_us=ts, event_id=event_id),))
        appended = self.rt.append([write])[0]
        self.note_streams([write])
        return t.MessageChanged(discussion=discussion, message_id=event.message_id, change=change, content=content,
                                seq=appended.seqs[0], duplicate=bool(appended.duplicates),
                                position=self.position(agent, appended.seqs))

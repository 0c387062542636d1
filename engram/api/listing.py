"""Listing and paging: the agents of a home, an agent's discussions, a discussion's messages, an agent's memories of
each kind, read from the log and the projections with engram's own SQL.

Every page is ordered by a key that never changes once a row exists (a message's seq; a memory's creation position
and id), and its `next_cursor` names the last row given: the next page starts after it, so rows that arrive while a
client pages appear once, at their place, and none is given twice. A cursor of a message page is the `seq` of the
last message (a client that follows a discussion passes the seq of the last message it has); other cursors are
opaque. The listing of agents is scoped in `engram.api.access` (a key sees its own agents only).
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any, cast

from engram.api.core import ApiCore
from engram.api import types as t
from engram.api.clock import iso
from engram.api.errors import check_count, error
from engram.events.messages import MessageAppended
from engram.kernel.ids import validate_discussion


def _iso(ts: datetime | None) -> str | None:
    return None if ts is None else ts.isoformat().replace("+00:00", "Z")


def _encode_cursor(key: int, ident: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([key, ident]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> tuple[int, str] | None:
    if not cursor:
        return None
    try:
        key, ident = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if isinstance(key, int) and isinstance(ident, str):
            return key, ident
    except (ValueError, TypeError):
        pass
    raise error("invalid_request", "cursor: not a cursor this list gave (pass a page's `next_cursor` as it is)")


def _message_cursor(cursor: str | None) -> int | None:
    if not cursor:
        return None
    if not cursor.isdigit() or len(cursor) > 19:
        raise error("invalid_request", "cursor: a message page's cursor is the `seq` of the last message you have "
                                       "(a page's `next_cursor`)")
    return int(cursor)


def _page_size(limit: int) -> int:
    check_count("limit", limit, t.MAX_PAGE)
    return limit


# What each kind of memory is read from: (table, the discussion column, creation key (SQL), id column, columns shown).
# The creation key and the id order a page and make its cursor; neither changes once the memory exists.
MEMORY_KINDS: dict[str, tuple[str, str, str, str, str]] = {
    "traces": ("memory_traces", "scope_id", "epoch_us(encoded_at)", "trace_id",
               "trace_id, trace_type, category, scope, scope_id, content, importance, confidence, retrieval_count, "
               "source_message_ids, encoded_at, last_access, active"),
    "chunks": ("discussion_memories", "discussion_id", "created_seq", "memory_id",
               "memory_id, discussion_id, generation, ordinal, created_seq, first_seq, last_seq, message_count, "
               "token_count, summary"),
    "vectors": ("vector_memories", "discussion_id", "created_seq", "memory_id",
                "memory_id, discussion_id, generation, ordinal, created_seq, created_ts, title, summary, entities, "
                "key_phrases, topics, sentiment, message_ids, first_ts, last_ts"),
    "observations": ("observation_notes", "scope_id", "recorded_seq", "note_id",
                     "note_id, scope, scope_id, type, text, importance, confidence, observed_at, refers_to, "
                     "source_message_ids, status, recorded_seq"),
}


class ListOps(ApiCore):
    def list_agents(self, agents: list[str] | None = None) -> t.AgentList:
        """The home's agents (only `agents` when given: a scoped key's), with their discussions, messages, active
        traces and first and last activity."""
        known = sorted(self.known_agents() if agents is None else set(agents) & self.known_agents())
        if not known:
            return t.AgentList(agents=[])
        # One query (each costs a confined SQL session): the discussions' counts, and the agent's active traces.
        _, rows = self.sql_rows(
            "SELECT d.agent, count(*), sum(d.messages), min(d.first_ts), max(d.last_ts), (SELECT count(*) FROM "
            "memory_traces m WHERE m.agent = d.agent AND m.active) FROM discussions d "
            "WHERE d.agent IN (SELECT unnest(?)) GROUP BY d.agent", [known])
        talk = {r[0]: r[1:5] for r in rows}
        traces = {r[0]: r[5] for r in rows}
        out = []
        for agent in known:
            discussions, messages, first, last = talk.get(agent, (0, 0, None, None))
            out.append(t.AgentSummary(agent=agent, discussions=int(discussions), messages=int(messages or 0),
                                      traces=int(traces.get(agent, 0)), first_activity=_iso(first),
                                      last_activity=_iso(last)))
        return t.AgentList(agents=out)

    def list_discussions(self, agent: str, *, limit: int = 100, cursor: str | None = None) -> t.DiscussionList:
        """An agent's discussions by id, `limit` a page (`cursor`: a page's `next_cursor`)."""
        self.require_agent(agent)
        limit = _page_size(limit)
        after = _decode_cursor(cursor)
        _, rows = self.sql_rows(
            "SELECT discussion_id, messages, tokens, first_ts, last_ts, last_seq FROM discussions WHERE agent = ? "
            "AND discussion_id > ? ORDER BY discussion_id LIMIT ?", [agent, after[1] if after else "", limit + 1])
        page = [t.DiscussionSummary(discussion=d, messages=int(m), tokens=int(k), first_activity=_iso(f),
                                    last_activity=_iso(la), last_seq=int(s)) for d, m, k, f, la, s in rows[:limit]]
        more = len(rows) > limit
        return t.DiscussionList(agent=agent, discussions=page,
                                next_cursor=_encode_cursor(0, page[-1].discussion) if more else None)

    def list_messages(self, agent: str, discussion: str, *, order: str = "oldest", limit: int = 100,
                      cursor: str | None = None) -> t.MessagePage:
        """A discussion's messages, `limit` a page, oldest or newest first, after `cursor` (the seq of the last
        message a previous page gave). Oldest first, a client following a discussion gets every message once."""
        self.discussion_agent(validate_discussion(discussion), agent)
        if order not in ("oldest", "newest"):
            raise error("invalid_request", f"order: {order!r} is neither 'oldest' nor 'newest'")
        limit = _page_size(limit)
        after = _message_cursor(cursor)
        # The log's own reads (by seq, one stream, one type): a page costs a few ms, where SQL over the log's views
        # costs a confined session per query. Newest first reads windows of the log back from the cursor (or head).
        kinds = ["MessageAppended"]
        if order == "oldest":
            records = self.rt.read(agent, after or 0, stream=discussion, types=kinds, limit=limit + 1)
        else:
            upper = (after - 1) if after is not None else self.rt.heads().get(self.rt.shard_of(agent), 0)
            records, window = [], (limit + 1) * 4
            while upper > 0 and len(records) <= limit:  # newest first: windows of the log back from `upper`
                lower = max(0, upper - window)
                older = self.rt.read(agent, lower, to_seq=upper, stream=discussion, types=kinds, limit=None)
                records += older[::-1]
                upper, window = lower, window * 4
        page = [t.StoredMessage(seq=r.seq, message_id=ev.message_id, role=ev.role, name=ev.name, content=ev.content,
                                ts=iso(r.ts_us), metadata=dict(ev.metadata))
                for r in records[:limit] if isinstance(ev := r.event, MessageAppended)]  # every one: read by type
        more = len(records) > limit
        return t.MessagePage(agent=agent, discussion=discussion, order=cast(t.PageOrder, order),  # checked above
                             messages=page,
                             next_cursor=str(page[-1].seq) if more else None)

    def list_memories(self, agent: str, kind: str, *, discussion: str | None = None, limit: int = 100,
                      cursor: str | None = None) -> t.MemoryPage:
        """An agent's memories of one kind (traces, chunk memories, vector memories, observation notes), in the
        order they were made, `limit` a page (only `discussion`'s when given)."""
        self.require_agent(agent)
        if kind not in MEMORY_KINDS:
            raise error("invalid_request", f"kind: {kind!r} is not a kind of memory; the kinds are "
                                           f"{', '.join(MEMORY_KINDS)}")
        if discussion is not None:
            self.discussion_agent(validate_discussion(discussion), agent)
        table, by_discussion, key, ident, columns = MEMORY_KINDS[kind]
        limit = _page_size(limit)
        after = _decode_cursor(cursor)
        where, params = "agent = ?", list[Any]([agent])
        if discussion is not None:
            where += f" AND {by_discussion} = ?"
            params.append(discussion)
        if after is not None:
            where += f" AND ({key}, {ident}) > (?, ?)"
            params += list(after)
        names, rows = self.sql_rows(f"SELECT {key} AS _key, {columns} FROM {table} WHERE {where} "
                                    f"ORDER BY {key}, {ident} LIMIT ?", [*params, limit + 1])
        page = [dict(zip(names[1:], (_plain(v) for v in row[1:]))) for row in rows[:limit]]
        more = len(rows) > limit
        cursor = _encode_cursor(int(rows[limit - 1][0]), rows[limit - 1][names.index(ident)]) if more else None
        return t.MemoryPage(agent=agent, kind=cast(t.ListedKind, kind), discussion=discussion, memories=page,
                            next_cursor=cursor)  # `kind`: one of MEMORY_KINDS, checked above


def _plain(value: Any) -> Any:
    """A read model's value as JSON has it (times as ISO 8601)."""
    if hasattr(value, "isoformat"):
        return _iso(value)
    return value

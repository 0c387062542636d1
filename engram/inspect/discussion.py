"""View 6, discussion memory: the three WilmerAI files of a discussion side by side — the chunk memories of
`<id>_memories.jsonl`, the rolling summary of `<id>_summary.jsonl` (and the memories it has absorbed), the
structured memories of `<id>_vector_memory.db` — and the messages each chunk covers, a page at a time.
"""

from __future__ import annotations

from engram.events.envelope import iso
from engram.inspect.source import MemoryReader

MESSAGES_PAGE = 200


def discussion_memory(reader: MemoryReader, agent: str, discussion: str) -> dict:
    files = reader.discussion_files(agent, discussion)
    memories = files.memories or []
    absorbed = None
    if files.summary is not None:
        ids = [m["memory_id"] for m in memories]
        through = files.summary.get("absorbed_through")
        absorbed = ids.index(through) + 1 if through in ids else files.summary.get("memories_absorbed")
    _, count = reader.sql("SELECT count(*), coalesce(sum(token_estimate), 0) FROM messages WHERE agent = ? AND discussion_id = ?",
                          [agent, discussion])
    return {
        "agent": agent,
        "discussion": discussion,
        "messages": count[0][0],
        "message_tokens": count[0][1],
        "paths": files.paths,
        "memories": memories if files.memories is not None else None,
        "summary": files.summary,
        "absorbed": absorbed,  # the first `absorbed` chunk memories are merged into the rolling summary
        "vector_memories": files.vector_memories,
    }


def messages(reader: MemoryReader, agent: str, discussion: str, *, first_seq: int | None = None,
             last_seq: int | None = None, offset: int = 0, limit: int = MESSAGES_PAGE) -> dict:
    """A page of the discussion's messages, optionally those of one seq range (what a chunk memory covers)."""
    where, params = "agent = ? AND discussion_id = ?", list[object]([agent, discussion])
    if first_seq is not None:
        where, params = where + " AND seq >= ?", params + [first_seq]
    if last_seq is not None:
        where, params = where + " AND seq <= ?", params + [last_seq]
    _, rows = reader.sql(
        f"SELECT seq, message_id, role, name, epoch_us(ts), content, token_estimate, count(*) OVER () FROM messages "
        f"WHERE {where} ORDER BY seq LIMIT ? OFFSET ?",
        params + [limit, offset],
    )
    total = rows[0][7] if rows else 0
    if not rows and offset:
        _, c = reader.sql(f"SELECT count(*) FROM messages WHERE {where}", params)
        total = c[0][0]
    return {
        "agent": agent, "discussion": discussion, "first_seq": first_seq, "last_seq": last_seq, "offset": offset,
        "limit": limit, "total": total,
        "rows": [{"seq": r[0], "message_id": r[1], "role": r[2], "name": r[3], "ts": iso(r[4]), "content": r[5],
                  "tokens": r[6]} for r in rows],
    }

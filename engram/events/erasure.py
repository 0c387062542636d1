"""Erasure: what forgetting a discussion (or an agent) removes from the log, planned from the log itself.

`plan` finds every event whose content must go: the streams' own events (before the forget marker), everything
their causation chains lead to (summaries, traces, facts made from them), and the agent-wide events that quote
their texts or report retrieving their traces (recalls, working memory), with what those caused. The EventStore
applies a plan (`EventStore.erase`: payloads replaced by `Purged` tombstones in one transaction). `unfinished`
finds forgets whose erasure did not happen (a crash between the marker and the erase).
"""

from __future__ import annotations

from typing import Sequence, TYPE_CHECKING

import msgspec

from engram.events.control import FORGET_MARKERS

if TYPE_CHECKING:
    from engram.events.store import EventStore

# A forgotten text is searched for elsewhere (quotes of it in other events, copies in policy state) when it
# is at least this long and has a space: shorter texts ("ok", an id) are everywhere by chance.
MIN_QUOTE_CHARS = 12
_ID_FIELD = ("id", "ids", "type", "stream", "scope", "role", "name", "reason", "trigger", "mode")


class Erasure(msgspec.Struct, frozen=True):
    seqs: list[int]
    texts: list[str]


def _quotable(value: object, key: str = "") -> list[str]:
    """The texts in a decoded payload worth searching for elsewhere (not ids, tags or short words)."""
    if isinstance(value, str):
        if key.endswith(_ID_FIELD) or len(value) < MIN_QUOTE_CHARS or not any(c.isspace() for c in value):
            return []
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _quotable(v, k)]
    if isinstance(value, list):
        return [t for v in value for t in _quotable(v, key)]
    return []


def plan(store: "EventStore", streams: Sequence[str], *, before_seq: int | None = None, agent: str | None = None) -> Erasure:
    """What forgetting `streams` erases: every event of the streams (before `before_seq`: the forget
    marker), everything caused by them (their causation chains), and every other event of the same
    agents that quotes their text or reports retrieving their traces, with what that caused in turn.

    `texts` are the forgotten texts (at least MIN_QUOTE_CHARS long, with a space): kept in memory only,
    to find copies elsewhere (e.g. in policy state), never written anywhere.

    A stream is named by its agent and its id (two agents may each have a `my-trip`): with `agent`, only that agent's
    streams of those names are erased; without, every agent's.
    """
    streams = list(streams)
    agents = sorted({a for (a, st) in store.streams() if st in streams and agent in (None, a)})
    limit = before_seq if before_seq is not None else store.head() + 1
    doomed = _caused_closure(
        store,
        [r[0] for r in store.query(
            "SELECT seq FROM events WHERE stream IN (SELECT unnest(?::VARCHAR[])) AND seq < ? "
            "AND agent IN (SELECT unnest(?::VARCHAR[]))", [streams, limit, agents])[1]])
    # What is forgotten: the texts and trace ids of the streams' events and of what they caused.
    texts: set[str] = set()
    trace_ids: set[str] = set()
    for type_, payload in _payloads(store, sorted(doomed)):
        data = msgspec.json.decode(payload)
        texts.update(_quotable(data))
        if type_ == "TraceEncoded" and isinstance(data.get("trace_id"), str):
            trace_ids.add(data["trace_id"])
    # Agent-wide events (stream `agent:<agent>`: working memory, recalls, reflections) that quote those texts
    # or report retrieving those traces go too, with what they caused. Other discussions are left alone even
    # where they say the same words: those are their own messages and what was made of them.
    quoted = [msgspec.json.encode(t)[1:-1].decode() for t in sorted(texts)]  # as they appear in JSON
    found = []
    for seq, type_, payload in store.query(
        "SELECT seq, type, payload FROM events WHERE stream IN (SELECT 'agent:' || unnest(?::VARCHAR[])) "
        "AND type <> 'Purged' AND type NOT IN (SELECT unnest(?::VARCHAR[])) ORDER BY seq",
        [agents, list(FORGET_MARKERS)])[1]:
        if seq in doomed:
            continue
        if any(q in payload for q in quoted) or (
            type_ == "TraceRetrieved" and trace_ids & set(msgspec.json.decode(payload).get("trace_ids", ()))
        ):
            found.append(seq)
    doomed |= _caused_closure(store, found)
    # Tombstones that kept their event ids (a deleted memory's, `EventStore.erase(keep_ids=True)`) lose them now: a
    # forgotten discussion's id may be used again by its agent, and nothing of the old may count as already recorded.
    kept = {r[0] for r in store.query(
        "SELECT seq FROM events WHERE seq IN (SELECT unnest(?::BIGINT[])) AND (type <> 'Purged' OR event_id IS NOT NULL) "
        "AND type NOT IN (SELECT unnest(?::VARCHAR[]))", [sorted(doomed), list(FORGET_MARKERS)])[1]}
    return Erasure(seqs=sorted(kept), texts=sorted(texts))


# The event that creates a memory of each kind (`engram.events.memory_edits.MEMORY_KINDS`), and its id field.
MEMORY_CREATED = {"trace": ("TraceEncoded", "trace_id"), "chunk": ("ChunkSummarized", "memory_id"),
                  "vector": ("VectorMemoryStored", "memory_id")}


def memory_events(store: "EventStore", agent: str, kind: str, memory_id: str, *, before_seq: int | None = None) -> list[int]:
    """The seqs of the events that make one memory: its creation and its edits (not yet erased)."""
    created, field = MEMORY_CREATED[kind]
    limit = before_seq if before_seq is not None else store.head() + 1
    return [r[0] for r in store.query(
        f"SELECT seq FROM events WHERE agent = ? AND seq < ? AND ("
        f"(type = ? AND json_extract_string(payload, '$.{field}') = ?) OR "
        f"(type = 'MemoryEdited' AND json_extract_string(payload, '$.kind') = ? "
        f"AND json_extract_string(payload, '$.memory_id') = ?)) ORDER BY seq",
        [agent, limit, created, memory_id, kind, memory_id])[1]]


# What deleting one memory leaves even when it says the same words: the conversation, and the other memories.
KEPT_WHEN_QUOTING = ("MessageAppended", "TraceEncoded", "ChunkSummarized", "VectorMemoryStored", "MemoryEdited")


def plan_memory(store: "EventStore", agent: str, kind: str, memory_id: str, *, before_seq: int | None = None) -> Erasure:
    """What deleting one memory erases: its creation and every edit of it, what they caused, and the events of its
    stream and of its agent's own stream that record something about one of its texts (working memory slots, a fact
    auto-ingest skipped as its duplicate, an observation), with what they caused.

    The messages it was made from stay (they are the conversation, not the memory; forgetting their discussion
    erases them), and so do other memories of the discussion that say the same words."""
    doomed = _caused_closure(store, memory_events(store, agent, kind, memory_id, before_seq=before_seq))
    if kind == "chunk" and doomed:
        doomed |= _summaries_since(store, agent, memory_id, min(doomed))
    texts: set[str] = set()
    for _, payload in _payloads(store, sorted(doomed)):
        data = msgspec.json.decode(payload)
        data.pop("metadata", None)  # metadata is the user's labels, not the memory's text
        texts.update(_quotable(data))
    quoted = [msgspec.json.encode(t)[1:-1].decode() for t in sorted(texts)]
    streams = [f"agent:{agent}", *{r[0] for r in store.query(
        "SELECT DISTINCT stream FROM events WHERE seq IN (SELECT unnest(?::BIGINT[]))", [sorted(doomed)])[1]}]
    found = [seq for seq, payload in store.query(
        "SELECT seq, payload FROM events WHERE stream IN (SELECT unnest(?::VARCHAR[])) AND type <> 'Purged' "
        "AND type NOT IN (SELECT unnest(?::VARCHAR[])) ORDER BY seq", [streams, [*FORGET_MARKERS, *KEPT_WHEN_QUOTING]])[1]
        if seq not in doomed and any(q in payload for q in quoted)]
    doomed |= _caused_closure(store, found)
    kept = {r[0] for r in store.query(
        "SELECT seq FROM events WHERE seq IN (SELECT unnest(?::BIGINT[])) AND type <> 'Purged' "
        "AND type NOT IN (SELECT unnest(?::VARCHAR[]))", [sorted(doomed), list(FORGET_MARKERS)])[1]}
    # A text the log keeps elsewhere (a trace's content is often its message's words) is no forgotten text: policy
    # state holding it is no sign of a leak.
    left = {text for text, q in zip(sorted(texts), quoted) if store.query(
        "SELECT count(*) FROM events WHERE agent = ? AND type <> 'Purged' AND seq NOT IN (SELECT unnest(?::BIGINT[])) "
        "AND contains(payload, ?)", [agent, sorted(doomed), q])[1][0][0]}
    return Erasure(seqs=sorted(kept), texts=sorted(texts - left))


def _summaries_since(store: "EventStore", agent: str, memory_id: str, created: int) -> set[int]:
    """The rolling summaries a chunk memory went into: the first update that merged it and every later update of its
    discussion's generation (each is made from the one before). The Summarizer merges what is left again."""
    rows = store.query(
        "SELECT seq, stream, json_extract(payload, '$.generation')::INTEGER FROM events WHERE agent = ? "
        "AND type = 'RollingSummaryUpdated' AND seq > ? AND contains(payload, ?) ORDER BY seq LIMIT 1",
        [agent, created, msgspec.json.encode(memory_id).decode()])[1]
    if not rows:
        return set()
    first, stream, generation = rows[0]
    return {r[0] for r in store.query(
        "SELECT seq FROM events WHERE stream = ? AND agent = ? AND type = 'RollingSummaryUpdated' AND seq >= ? "
        "AND json_extract(payload, '$.generation')::INTEGER = ?", [stream, agent, first, generation])[1]}


def _caused_closure(store: "EventStore", seqs: list[int]) -> set[int]:
    if not seqs:
        return set()
    rows = store.query(
        """
        WITH RECURSIVE doomed(seq) AS (
            SELECT unnest(?::BIGINT[])
            UNION
            SELECT e.seq FROM events e JOIN doomed d ON e.causation = d.seq
        )
        SELECT seq FROM doomed
        """, [seqs])[1]
    return {r[0] for r in rows}


def _payloads(store: "EventStore", seqs: list[int]) -> list[tuple[str, str]]:
    if not seqs:
        return []
    return store.query(
        "SELECT type, payload FROM events WHERE seq IN (SELECT unnest(?::BIGINT[])) AND type <> 'Purged'", [seqs])[1]


def unfinished(store: "EventStore") -> list[tuple[int, list[str]]]:
    """Forget markers whose streams still hold events from before the marker that were not erased
    (a forget interrupted before its erasure committed): [(marker seq, streams)]."""
    out = []
    for seq, type_, payload, agent in store.query(
        "SELECT seq, type, payload, agent FROM events WHERE type IN (SELECT unnest(?::VARCHAR[])) ORDER BY seq",
        [list(FORGET_MARKERS)])[1]:
        data = msgspec.json.decode(payload)
        if type_ == "MemoryDeleted":
            if memory_events(store, agent, data["kind"], data["memory_id"], before_seq=seq):
                out.append((seq, [memory_key(data["kind"], data["memory_id"])]))
            continue
        if type_ == "DiscussionForgotten":
            streams = [data["discussion_id"]]
        else:
            streams = sorted(st for (a, st) in store.streams() if a == data["agent_id"])
        left = store.query(
            "SELECT count(*) FROM events WHERE stream IN (SELECT unnest(?::VARCHAR[])) AND agent = ? AND seq < ? "
            "AND type <> 'Purged' AND type NOT IN (SELECT unnest(?::VARCHAR[]))",
            [streams, agent, seq, list(FORGET_MARKERS)])[1][0][0]
        if left:
            out.append((seq, streams))
    return out


# A deleted memory travels through the forget machinery as a pseudo-stream "memory:<kind>:<id>" (never a valid
# stream id: streams hold no colon, except "agent:<id>").
MEMORY_PREFIX = "memory:"


def memory_key(kind: str, memory_id: str) -> str:
    return f"{MEMORY_PREFIX}{kind}:{memory_id}"


def parse_memory_key(key: str) -> tuple[str, str] | None:
    if not key.startswith(MEMORY_PREFIX):
        return None
    kind, _, memory_id = key[len(MEMORY_PREFIX):].partition(":")
    return kind, memory_id


def search_terms(texts: Sequence[str], min_chars: int = 12) -> list[bytes]:
    """What to look for in other state: the forgotten texts, and their long words (a code, an address, a
    name with digits), which a derived piece of state (an entity, a key phrase) can hold on its own."""
    terms = set(texts)
    for text in texts:
        for word in text.split():
            word = word.strip(".,;:!?()[]{}\"'«»“”")
            if len(word) >= min_chars:
                terms.add(word)
    return sorted(t.encode("utf-8") for t in terms)

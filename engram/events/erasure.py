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


def plan(store: "EventStore", streams: Sequence[str], *, before_seq: int | None = None) -> Erasure:
    """What forgetting `streams` erases: every event of the streams (before `before_seq`: the forget
    marker), everything caused by them (their causation chains), and every other event of the same
    agents that quotes their text or reports retrieving their traces, with what that caused in turn.

    `texts` are the forgotten texts (at least MIN_QUOTE_CHARS long, with a space): kept in memory only,
    to find copies elsewhere (e.g. in policy state), never written anywhere.
    """
    streams = list(streams)
    agents = sorted({a for st, (_, a) in store.streams().items() if st in streams})
    limit = before_seq if before_seq is not None else store.head() + 1
    doomed = _caused_closure(
        store,
        [r[0] for r in store.query(
            "SELECT seq FROM events WHERE stream IN (SELECT unnest(?::VARCHAR[])) AND seq < ?", [streams, limit])[1]])
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
    kept = {r[0] for r in store.query(
        "SELECT seq FROM events WHERE seq IN (SELECT unnest(?::BIGINT[])) AND type <> 'Purged' "
        "AND type NOT IN (SELECT unnest(?::VARCHAR[]))", [sorted(doomed), list(FORGET_MARKERS)])[1]}
    return Erasure(seqs=sorted(kept), texts=sorted(texts))


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
        if type_ == "DiscussionForgotten":
            streams = [data["discussion_id"]]
        else:
            streams = sorted(st for st, (_, a) in store.streams().items() if a == data["agent_id"])
        left = store.query(
            "SELECT count(*) FROM events WHERE stream IN (SELECT unnest(?::VARCHAR[])) AND seq < ? AND type <> 'Purged' "
            "AND type NOT IN (SELECT unnest(?::VARCHAR[]))", [streams, seq, list(FORGET_MARKERS)])[1][0][0]
        if left:
            out.append((seq, streams))
    return out


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

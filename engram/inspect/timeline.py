"""View 1, the timeline: what happened to a discussion and its agent, lane by lane, on event time; and the
lineage of any item (its event, the messages it came from, the LLM call that made it, what caused it).

A lane shows at most `limit` items (the latest); `total` says how many there are, so a long history is
paged on the server, never shipped whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

from engram.events.envelope import iso
from engram.inspect.source import MemoryReader
from engram.settings import agent_stream

LANE_LIMIT = 2_000
LINEAGE_MESSAGES = 200  # source messages listed per item (the count is always given)


@dataclass(frozen=True)
class Lane:
    key: str
    title: str
    types: tuple[str, ...]
    # Extra SQL condition on the event row (payload JSON), e.g. buffered observations only.
    where: str = ""


def _consolidation_did_something() -> str:
    fields = ("pruned", "edges", "schemas", "conflicts", "reinforced")
    return "(" + " + ".join(f"coalesce(TRY_CAST(payload->>'$.{f}' AS BIGINT), 0)" for f in fields) + ") > 0"


LANES: tuple[Lane, ...] = (
    Lane("messages", "messages", ("MessageAppended",)),
    Lane("chunk_memories", "chunk memories", ("ChunkSummarized",)),
    Lane("summary_updates", "summary updates", ("RollingSummaryUpdated",)),
    Lane("observations_buffered", "observations (buffered)", ("ObservationsRecorded",),
         "TRY_CAST(payload->>'$.buffered' AS BOOLEAN)"),
    Lane("observations_active", "observations (active)", ("ObservationsRecorded", "ObservationsActivated"),
         "NOT (type = 'ObservationsRecorded' AND TRY_CAST(payload->>'$.buffered' AS BOOLEAN))"),
    Lane("reflections", "reflections", ("Reflected",)),
    Lane("compactions", "compactions", ("ContextCompacted",)),
    # Idle runs (an hourly tick that found nothing to do) are counted, not drawn.
    Lane("consolidations", "consolidation runs", ("ConsolidationRan",), _consolidation_did_something()),
    Lane("mood", "mood changes", ("MoodChanged",)),
)


def _lane_case() -> str:
    parts = []
    for lane in LANES:
        cond = "type IN (" + ", ".join(f"'{t}'" for t in lane.types) + ")"
        if lane.where:
            cond += f" AND {lane.where}"
        parts.append(f"WHEN {cond} THEN '{lane.key}'")
    return "CASE " + " ".join(parts) + " END"


def _scope(agent: str, discussion: str | None) -> tuple[str, list]:
    if discussion is None:
        return "agent = ?", [agent]
    return "agent = ? AND stream IN (?, ?)", [agent, discussion, agent_stream(agent)]


def timeline(reader: MemoryReader, agent: str, discussion: str | None, limit: int = LANE_LIMIT) -> dict:
    types = sorted({t for lane in LANES for t in lane.types})
    scope, params = _scope(agent, discussion)
    type_list = ", ".join(f"'{t}'" for t in types)
    _, rows = reader.sql(
        f"SELECT lane, seq, epoch_us(ts), type, stream, payload, total FROM ("
        f"  SELECT *, row_number() OVER (PARTITION BY lane ORDER BY seq DESC) AS rn, count(*) OVER (PARTITION BY lane) AS total"
        f"  FROM (SELECT {_lane_case()} AS lane, seq, ts, type, stream, payload FROM events_raw"
        f"        WHERE {scope} AND type IN ({type_list}))"
        f"  WHERE lane IS NOT NULL) WHERE rn <= ? ORDER BY seq",
        [*params, limit],
    )
    _, idle = reader.sql(
        f"SELECT count(*) FROM events_raw WHERE {scope} AND type = 'ConsolidationRan' AND NOT {_consolidation_did_something()}",
        params,
    )
    items: dict[str, list[dict]] = {lane.key: [] for lane in LANES}
    totals: dict[str, int] = {lane.key: 0 for lane in LANES}
    for lane, seq, ts_us, type_, stream, payload, total in rows:
        p = json.loads(payload) if isinstance(payload, str) else (payload or {})
        items[lane].append({"seq": seq, "ts": iso(ts_us), "type": type_, "stream": stream, "label": label(type_, p)})
        totals[lane] = total
    times = [i["ts"] for lane in items.values() for i in lane]
    return {
        "agent": agent,
        "discussion": discussion,
        "limit": limit,
        "idle_consolidations": idle[0][0] if idle else 0,
        "first_ts": min(times) if times else None,
        "last_ts": max(times) if times else None,
        "lanes": [
            {"key": lane.key, "title": lane.title, "types": list(lane.types), "total": totals[lane.key],
             "shown": len(items[lane.key]), "items": items[lane.key]}
            for lane in LANES
        ],
    }


def _clip(text: str, n: int = 140) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


_LABELS: dict[str, Callable[[dict], str]] = {
    "MessageAppended": lambda p: f"{p.get('role', '?')}{' (' + p['name'] + ')' if p.get('name') else ''}: {_clip(p.get('content', ''))}",
    "ChunkSummarized": lambda p: f"{len(p.get('message_ids', []))} messages → {_clip(p.get('summary', ''))}",
    "RollingSummaryUpdated": lambda p: f"merged {p.get('memories_merged', 0)} memories → {_clip(p.get('summary', ''))}",
    "ObservationsRecorded": lambda p: (
        f"{len(p.get('notes', []))} notes from messages {p.get('first_seq')}–{p.get('last_seq')}"
        f"{' (buffered)' if p.get('buffered') else ''}"
    ),
    "ObservationsActivated": lambda p: (
        f"{p.get('note_count', 0)} buffered notes activated ({p.get('unobserved_tokens', 0)} unobserved tokens "
        f"≥ {p.get('threshold', 0)})"
    ),
    "Reflected": lambda p: (
        f"{len(p.get('consumed_note_ids', []))} notes → {len(p.get('trace_ids', []))} traces"
        f"{', ' + str(len(p.get('duplicates', []))) + ' restated' if p.get('duplicates') else ''}"
    ),
    "ContextCompacted": lambda p: (
        f"L{p.get('level', 0)} {p.get('strategy', '')} turns {p.get('first_turn')}–{p.get('last_turn')}: "
        f"{p.get('input_tokens', 0)} → {p.get('output_tokens', 0)} tokens"
    ),
    "ConsolidationRan": lambda p: ", ".join(
        f"{p.get(k, 0)} {k}" for k in ("pruned", "edges", "schemas", "conflicts", "reinforced") if p.get(k)
    ) or "idle",
    "MoodChanged": lambda p: (
        f"valence {p.get('valence', 0):+.2f} arousal {p.get('arousal', 0):+.2f} dominance {p.get('dominance', 0):+.2f}"
        f"{' — ' + _clip(p.get('reason', ''), 60) if p.get('reason') else ''}"
    ),
}


def label(type_: str, payload: dict) -> str:
    fn = _LABELS.get(type_)
    return fn(payload) if fn else type_


# ---------------------------------------------------------------------- lineage

_MESSAGE_COLUMNS = "seq, message_id, role, name, epoch_us(ts), content"


def _messages(reader: MemoryReader, agent: str, where: str, params: list) -> tuple[list[dict], int]:
    _, rows = reader.sql(
        f"SELECT {_MESSAGE_COLUMNS}, count(*) OVER () FROM messages WHERE agent = ? AND {where} ORDER BY seq LIMIT ?",
        [agent, *params, LINEAGE_MESSAGES],
    )
    msgs = [{"seq": r[0], "message_id": r[1], "role": r[2], "name": r[3], "ts": iso(r[4]), "content": r[5]} for r in rows]
    return msgs, (rows[0][6] if rows else 0)


def _event_row(reader: MemoryReader, agent: str, seq: int) -> dict | None:
    _, rows = reader.sql(
        "SELECT seq, epoch_us(ts), type, stream, stream_version, causation, event_id, schema_version, payload "
        "FROM events_raw WHERE agent = ? AND seq = ?",
        [agent, seq],
    )
    if not rows:
        return None
    r = rows[0]
    payload = json.loads(r[8]) if isinstance(r[8], str) else (r[8] or {})
    if isinstance(payload.get("embedding"), str):
        payload["embedding"] = f"(the embedding, {len(payload['embedding'])} base64 characters, is left out here)"
    return {"seq": r[0], "ts": iso(r[1]), "type": r[2], "stream": r[3], "stream_version": r[4], "causation": r[5],
            "event_id": r[6], "schema_version": r[7], "payload": payload}


def lineage(reader: MemoryReader, agent: str, seq: int) -> dict | None:
    """Where an item came from: its event, its source messages, the LLM call(s) that made it, its cause."""
    event = _event_row(reader, agent, seq)
    if event is None:
        return None
    p, type_ = event["payload"], event["type"]
    llm = p.get("llm")
    calls = llm if isinstance(llm, list) else ([llm] if isinstance(llm, dict) else [])
    related: list[dict] = []
    messages, total = [], 0
    if type_ == "MessageAppended":
        messages, total = _messages(reader, agent, "seq = ?", [seq])
    elif "first_seq" in p and "last_seq" in p:
        messages, total = _messages(reader, agent, "discussion_id = ? AND seq BETWEEN ? AND ?",
                                    [event["stream"], p["first_seq"], p["last_seq"]])
    elif p.get("source_seqs"):
        messages, total = _messages(reader, agent, "seq IN (SELECT unnest(?))", [list(p["source_seqs"])])
    if type_ == "RollingSummaryUpdated" and p.get("merged_memory_ids"):
        _, rows = reader.sql(
            "SELECT memory_id, first_seq, last_seq, summary FROM discussion_memories WHERE agent = ? AND discussion_id = ? "
            "AND memory_id IN (SELECT unnest(?)) ORDER BY first_seq",
            [agent, event["stream"], list(p["merged_memory_ids"])],
        )
        related += [{"kind": "chunk memory", "id": r[0], "text": f"messages {r[1]}–{r[2]}: {r[3]}"} for r in rows]
        if rows:
            messages, total = _messages(reader, agent, "discussion_id = ? AND seq BETWEEN ? AND ?",
                                        [event["stream"], rows[0][1], rows[-1][2]])
    elif type_ == "Reflected" and p.get("consumed_note_ids"):
        _, rows = reader.sql(
            "SELECT note_id, type, text, source_seqs FROM observation_notes WHERE agent = ? AND note_id IN (SELECT unnest(?)) "
            "ORDER BY observed_at, note_id",
            [agent, list(p["consumed_note_ids"])],
        )
        related += [{"kind": f"note ({r[1]})", "id": r[0], "text": r[2]} for r in rows]
        seqs = sorted({s for r in rows for s in (r[3] or ())})
        if seqs:
            messages, total = _messages(reader, agent, "seq IN (SELECT unnest(?))", [seqs])
        related += _traces(reader, agent, list(p.get("trace_ids", [])), "trace made")
    elif type_ == "ObservationsActivated":
        _, rows = reader.sql(
            "SELECT seq, payload->>'$.first_seq', payload->>'$.last_seq', json_array_length(payload->'$.notes') "
            "FROM events_raw WHERE agent = ? AND stream = ? AND type = 'ObservationsRecorded' "
            "AND TRY_CAST(payload->>'$.buffered' AS BOOLEAN) AND seq < ? AND TRY_CAST(payload->>'$.last_seq' AS BIGINT) <= ? "
            "ORDER BY seq",
            [agent, event["stream"], seq, p.get("through_seq", 0)],
        )
        related += [{"kind": "buffered increment", "id": f"seq {r[0]}", "text": f"{r[3]} notes from messages {r[1]}–{r[2]}"}
                    for r in rows]
    elif type_ == "ContextCompacted" and p.get("children"):
        related += [{"kind": "merged node", "id": c, "text": ""} for c in p["children"]]
    if p.get("trace_ids") and type_ != "Reflected":
        related += _traces(reader, agent, list(p["trace_ids"]), "trace")
    if p.get("traces_created"):
        related += _traces(reader, agent, list(p["traces_created"]), "trace made")
    cause = _event_row(reader, agent, event["causation"]) if event["causation"] else None
    return {
        "event": event,
        "llm": calls,
        "messages": messages,
        "messages_total": total,
        "related": related,
        "cause": None if cause is None else {"seq": cause["seq"], "ts": cause["ts"], "type": cause["type"],
                                             "label": label(cause["type"], cause["payload"])},
    }


def _traces(reader: MemoryReader, agent: str, ids: list[str], kind: str) -> list[dict]:
    if not ids:
        return []
    _, rows = reader.sql(
        "SELECT trace_id, content FROM memory_traces WHERE agent = ? AND trace_id IN (SELECT unnest(?)) ORDER BY trace_id",
        [agent, ids],
    )
    return [{"kind": kind, "id": r[0], "text": r[1]} for r in rows]

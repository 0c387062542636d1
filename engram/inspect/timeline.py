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
from engram.kernel.ids import agent_stream

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


def _payload(value) -> dict:
    p = json.loads(value) if isinstance(value, str) else dict(value or {})
    if isinstance(p.get("embedding"), str):
        p["embedding"] = f"(the embedding, {len(p['embedding'])} base64 characters, is left out here)"
    return p


def _events(reader: MemoryReader, agent: str, seqs: list[int]) -> dict[int, dict]:
    _, rows = reader.sql(
        "SELECT seq, epoch_us(ts), type, stream, stream_version, causation, event_id, schema_version, payload "
        "FROM events_raw WHERE agent = ? AND seq IN (SELECT unnest(?))",
        [agent, seqs],
    )
    return {r[0]: {"seq": r[0], "ts": iso(r[1]), "type": r[2], "stream": r[3], "stream_version": r[4], "causation": r[5],
                   "event_id": r[6], "schema_version": r[7], "payload": _payload(r[8])} for r in rows}


def _message_ranges(reader: MemoryReader, agent: str, ranges: list[tuple[int, str | None, int, int]]) -> dict[int, tuple[list, int]]:
    """Messages of many (key, stream or None for any, first seq, last seq) ranges in one query: key -> (the first
    LINEAGE_MESSAGES of them, how many there are)."""
    if not ranges:
        return {}
    keys, streams, lows, highs = (list(x) for x in zip(*ranges))
    _, rows = reader.sql(
        "SELECT k, seq, message_id, role, name, epoch_us(ts), content, total FROM ("
        "  SELECT r.k, m.seq, m.message_id, m.role, m.name, m.ts, m.content, count(*) OVER (PARTITION BY r.k) AS total,"
        "         row_number() OVER (PARTITION BY r.k ORDER BY m.seq) AS n"
        "  FROM (SELECT unnest(?) AS k, unnest(?::VARCHAR[]) AS stream, unnest(?) AS lo, unnest(?) AS hi) r"
        "  JOIN messages m ON m.seq BETWEEN r.lo AND r.hi AND (r.stream IS NULL OR m.discussion_id = r.stream)"
        "  WHERE m.agent = ?) WHERE n <= ? ORDER BY k, seq",
        [keys, streams, lows, highs, agent, LINEAGE_MESSAGES],
    )
    out: dict[int, tuple[list, int]] = {}
    for k, seq, mid, role, name, ts, content, total in rows:
        msgs, _ = out.get(k, ([], 0))
        msgs.append({"seq": seq, "message_id": mid, "role": role, "name": name, "ts": iso(ts), "content": content})
        out[k] = (msgs, total)
    return out


def _rows_by(reader: MemoryReader, query: str, params: list, key: int = 0) -> dict:
    _, rows = reader.sql(query, params)
    return {r[key]: r for r in rows}


def lineages(reader: MemoryReader, agent: str, seqs: list[int]) -> dict[int, dict]:
    """Where each item came from: its event, its source messages, the LLM call(s) that made it, its cause and
    what it relates to (merged memories, consumed notes, traces made). A fixed number of queries for any number
    of items."""
    events = _events(reader, agent, sorted(set(seqs)))
    causes = _events(reader, agent, sorted({e["causation"] for e in events.values() if e["causation"]}))
    memory_ids = sorted({m for e in events.values() if e["type"] == "RollingSummaryUpdated"
                         for m in e["payload"].get("merged_memory_ids", [])})
    memories = _rows_by(reader, "SELECT memory_id, first_seq, last_seq, summary, discussion_id FROM discussion_memories "
                        "WHERE agent = ? AND memory_id IN (SELECT unnest(?))", [agent, memory_ids]) if memory_ids else {}
    note_ids = sorted({n for e in events.values() if e["type"] == "Reflected" for n in e["payload"].get("consumed_note_ids", [])})
    notes = _rows_by(reader, "SELECT note_id, type, text, source_seqs FROM observation_notes WHERE agent = ? "
                     "AND note_id IN (SELECT unnest(?))", [agent, note_ids]) if note_ids else {}
    trace_ids = sorted({t for e in events.values() for f in ("trace_ids", "traces_created") for t in e["payload"].get(f) or []})
    traces = _rows_by(reader, "SELECT trace_id, content FROM memory_traces WHERE agent = ? AND trace_id IN (SELECT unnest(?))",
                      [agent, trace_ids]) if trace_ids else {}
    ranges: list[tuple[int, str | None, int, int]] = []
    related: dict[int, list[dict]] = {}
    for seq, e in events.items():
        p, type_, rel = e["payload"], e["type"], related.setdefault(seq, [])
        if type_ == "MessageAppended":
            ranges.append((seq, None, seq, seq))
        elif type_ == "RollingSummaryUpdated":
            merged = sorted((memories[m] for m in p.get("merged_memory_ids", []) if m in memories), key=lambda r: r[1])
            rel += [{"kind": "chunk memory", "id": r[0], "text": f"messages {r[1]}–{r[2]}: {r[3]}"} for r in merged]
            if merged:
                ranges.append((seq, e["stream"], merged[0][1], merged[-1][2]))
        elif type_ == "Reflected":
            consumed = [notes[n] for n in p.get("consumed_note_ids", []) if n in notes]
            rel += [{"kind": f"note ({r[1]})", "id": r[0], "text": r[2]} for r in consumed]
            ranges += [(seq, None, s, s) for s in sorted({s for r in consumed for s in (r[3] or ())})]
        elif "first_seq" in p and "last_seq" in p:
            ranges.append((seq, e["stream"], p["first_seq"], p["last_seq"]))
        elif p.get("source_seqs"):
            ranges += [(seq, None, s, s) for s in p["source_seqs"]]
        if type_ == "ObservationsActivated":
            _, rows = reader.sql(
                "SELECT seq, payload->>'$.first_seq', payload->>'$.last_seq', json_array_length(payload->'$.notes') "
                "FROM events_raw WHERE agent = ? AND stream = ? AND type = 'ObservationsRecorded' "
                "AND TRY_CAST(payload->>'$.buffered' AS BOOLEAN) AND seq < ? "
                "AND TRY_CAST(payload->>'$.last_seq' AS BIGINT) <= ? ORDER BY seq",
                [agent, e["stream"], seq, p.get("through_seq", 0)],
            )
            rel += [{"kind": "buffered increment", "id": f"seq {r[0]}", "text": f"{r[3]} notes from messages {r[1]}–{r[2]}"}
                    for r in rows]
        if type_ == "ContextCompacted":
            rel += [{"kind": "merged node", "id": c, "text": ""} for c in p.get("children", [])]
        for field, kind in (("trace_ids", "trace made" if type_ == "Reflected" else "trace"), ("traces_created", "trace made")):
            rel += [{"kind": kind, "id": t, "text": traces[t][1]} for t in p.get(field) or [] if t in traces]
    messages = _message_ranges(reader, agent, ranges)
    out = {}
    for seq, e in events.items():
        llm = e["payload"].get("llm")
        cause = causes.get(e["causation"]) if e["causation"] else None
        msgs, total = messages.get(seq, ([], 0))
        out[seq] = {
            "event": e,
            "llm": llm if isinstance(llm, list) else ([llm] if isinstance(llm, dict) else []),
            "messages": msgs,
            "messages_total": total,
            "related": related[seq],
            "cause": None if cause is None else {"seq": cause["seq"], "ts": cause["ts"], "type": cause["type"],
                                                 "label": label(cause["type"], cause["payload"])},
        }
    return out


def lineage(reader: MemoryReader, agent: str, seq: int) -> dict | None:
    return lineages(reader, agent, [seq]).get(seq)

"""View 2, forgetting curves: a trace's Ebbinghaus strength from encoding to now, with every retrieval and
spaced-repetition review marked and the prune threshold drawn; small multiples of the agent's strongest
and weakest traces; the agent's traces, a page at a time.

The curve is computed here from the trace's recorded life (`trace_changes`) with the same formula the
memory uses (`engram.memory.cognitive.decay.ebbinghaus`): between two events that reset the decay clock
(encoding, retrieval, review) strength falls as S0·exp(−Δt/stability); at each of them it jumps to the
new S0. "Now" is the agent's latest event time, as in the `trace_strength` view.
"""

from __future__ import annotations

from engram.events.envelope import iso
from engram.inspect.source import MemoryReader
from engram.kernel import records
from engram.memory.cognitive.decay import ebbinghaus
from engram.memory.cognitive.model import MemoryTrace

US = 1_000_000
RESETS = frozenset({"encoded", "retrieved", "reinforced"})  # changes after which S(t) starts again from S0
CURVE_POINTS = 240  # samples per curve, spread over its segments
MULTIPLES = 6  # strongest and weakest traces each in the small multiples
PAGE = 50


def sample(changes: list[dict], now_us: int, points: int = CURVE_POINTS) -> list[tuple[int, float]]:
    """(event time, strength) along the curve of a trace whose life is `changes` (oldest first, the first
    one its encoding), up to `now_us` or its deletion. A segment ends at the next reset with what that reset
    found (its strength_before), and the next one starts there from the new S0: a vertical step."""
    if not changes:
        return []
    end = now_us
    for c in changes:
        if c["change"] in ("pruned", "superseded"):
            end = c["ts_us"]
            break
    resets = [c for c in changes if c["change"] in RESETS and c["ts_us"] <= end]
    per = max(2, points // max(1, len(resets)))
    out: list[tuple[int, float]] = []
    for i, c in enumerate(resets):
        start = c["ts_us"]
        stop = resets[i + 1]["ts_us"] if i + 1 < len(resets) else end
        s0, stability = c["encoding_strength"], c["stability_s"]
        for k in range(per):
            t = start + (stop - start) * k // (per - 1) if stop > start else start
            out.append((t, ebbinghaus(s0, (t - start) / US, stability)))
            if stop <= start:
                break
    return out


def _changes(reader: MemoryReader, agent: str, trace_ids: list[str]) -> dict[str, list[dict]]:
    _, rows = reader.sql(
        "SELECT trace_id, seq, epoch_us(ts), change, strength_before, strength_after, encoding_strength, stability_s, "
        "interval_s, retrieval_count, detail FROM trace_changes WHERE agent = ? AND trace_id IN (SELECT unnest(?)) "
        "ORDER BY trace_id, seq",
        [agent, trace_ids],
    )
    keys = ("seq", "ts_us", "change", "strength_before", "strength_after", "encoding_strength", "stability_s",
            "interval_s", "retrieval_count", "detail")
    out: dict[str, list[dict]] = {t: [] for t in trace_ids}
    for r in rows:
        out[r[0]].append(dict(zip(keys, r[1:])))
    return out


def agent_now(reader: MemoryReader, agent: str) -> int | None:
    _, rows = reader.sql("SELECT epoch_us(max(ts)) FROM events_raw WHERE agent = ?", [agent])
    return rows[0][0] if rows and rows[0][0] is not None else None


def prune_threshold(reader: MemoryReader, agent: str) -> float:
    return reader.agent_config(agent).memory.decay.prune_threshold


_TRACE_COLUMNS = records.columns(
    MemoryTrace, "trace_id", "trace_type", "category", "content", "active", "importance", "retrieval_count",
    "verification_count", "epoch_us(encoded_at) AS encoded_at", "epoch_us(next_due) AS next_due",
    "reinforcement_interval_s", "deleted_reason",
)


def _curve(trace: dict, changes: list[dict], now_us: int) -> dict:
    """The curve of a trace (`trace`: a row of `_TRACE_COLUMNS` by column name)."""
    active, next_due = trace["active"], trace["next_due"]
    points = sample(changes, now_us)
    events = []
    previous = None
    for c in changes:
        if c["change"] == "encoded":
            previous = c["ts_us"]
            continue
        mark = {"ts": iso(c["ts_us"]), "change": c["change"], "before": round(c["strength_before"], 6),
                "after": round(c["strength_after"], 6), "interval_h": round(c["interval_s"] / 3600, 3),
                "detail": c["detail"] or ""}
        if c["change"] in ("retrieved", "reinforced"):
            # The spacing: time since the previous encoding, retrieval or review.
            mark["gap_h"] = round((c["ts_us"] - previous) / US / 3600, 3) if previous is not None else None
            previous = c["ts_us"]
        events.append(mark)
    return {
        "trace_id": trace["trace_id"], "trace_type": trace["trace_type"], "category": trace["category"],
        "content": trace["content"], "active": active, "importance": trace["importance"],
        "retrievals": trace["retrieval_count"], "verified": trace["verification_count"], "encoded": iso(trace["encoded_at"]),
        "next_due": iso(next_due) if next_due is not None and active else None,
        "interval_h": round((trace["reinforcement_interval_s"] or 0) / 3600, 3), "deleted_reason": trace["deleted_reason"],
        "strength_now": round(points[-1][1], 6) if points else None,
        # Event time in epoch milliseconds (what a date axis reads; shorter than ISO text over hundreds of points).
        "x": [t // 1000 for t, _ in points], "y": [round(s, 6) for _, s in points], "events": events,
    }


def curves_of(reader: MemoryReader, agent: str, trace_ids: list[str], now_us: int) -> list[dict]:
    if not trace_ids:
        return []
    names, rows = reader.sql(
        f"SELECT {_TRACE_COLUMNS} FROM memory_traces WHERE agent = ? AND trace_id IN (SELECT unnest(?))", [agent, trace_ids]
    )
    by_id = {r["trace_id"]: r for r in (dict(zip(names, row)) for row in rows)}
    changes = _changes(reader, agent, [t for t in trace_ids if t in by_id])
    return [_curve(by_id[t], changes[t], now_us) for t in trace_ids if t in by_id]


def curves(reader: MemoryReader, agent: str, trace_ids: list[str]) -> dict[str, dict]:
    """The curve of each trace (those that exist), with "now" and the prune threshold: a fixed number of queries."""
    now = agent_now(reader, agent)
    if now is None:
        return {}
    threshold = prune_threshold(reader, agent)
    return {c["trace_id"]: {"agent": agent, "now": iso(now), "prune_threshold": threshold, "curve": c}
            for c in curves_of(reader, agent, trace_ids, now)}


def curve(reader: MemoryReader, agent: str, trace_id: str) -> dict | None:
    return curves(reader, agent, [trace_id]).get(trace_id)


def _strength_order(reader: MemoryReader, agent: str, order: str, limit: int, offset: int = 0,
                    active_only: bool = True) -> tuple[list[tuple], int]:
    direction = "DESC" if order == "strongest" else "ASC"
    _, rows = reader.sql(
        "SELECT s.trace_id, s.strength, t.trace_type, t.retrieval_count, t.active, t.content, count(*) OVER () "
        "FROM trace_strength s JOIN memory_traces t USING (trace_id) WHERE s.agent = ? "
        + ("AND t.active " if active_only else "")
        + f"ORDER BY s.strength {direction}, s.trace_id LIMIT ? OFFSET ?",
        [agent, limit, offset],
    )
    return rows, (rows[0][6] if rows else _count(reader, agent, active_only))


def _count(reader: MemoryReader, agent: str, active_only: bool) -> int:
    _, rows = reader.sql(
        "SELECT count(*) FROM memory_traces WHERE agent = ?" + (" AND active" if active_only else ""), [agent]
    )
    return rows[0][0]


def forgetting(reader: MemoryReader, agent: str, multiples: int = MULTIPLES) -> dict:
    """The small multiples (strongest and weakest active traces) and the threshold they are drawn against."""
    now = agent_now(reader, agent)
    if now is None:
        return {"agent": agent, "now": None, "prune_threshold": prune_threshold(reader, agent), "strongest": [],
                "weakest": [], "active": 0}
    strongest, active = _strength_order(reader, agent, "strongest", multiples)
    weakest, _ = _strength_order(reader, agent, "weakest", multiples)
    ids = [r[0] for r in strongest] + [r[0] for r in weakest if r[0] not in {s[0] for s in strongest}]
    by_id = {c["trace_id"]: c for c in curves_of(reader, agent, ids, now)}
    return {
        "agent": agent, "now": iso(now), "prune_threshold": prune_threshold(reader, agent), "active": active,
        "strongest": [by_id[r[0]] for r in strongest if r[0] in by_id],
        "weakest": [by_id[r[0]] for r in weakest if r[0] in by_id],
    }


def traces_page(reader: MemoryReader, agent: str, *, order: str = "strongest", offset: int = 0, limit: int = PAGE,
                include_inactive: bool = False) -> dict:
    """One page of the agent's traces by strength now (the list a curve is picked from)."""
    rows, total = _strength_order(reader, agent, order, limit, offset, active_only=not include_inactive)
    return {
        "agent": agent, "order": order, "offset": offset, "limit": limit, "total": total,
        "include_inactive": include_inactive,
        "rows": [{"trace_id": r[0], "strength": round(r[1], 6), "trace_type": r[2], "retrievals": r[3], "active": r[4],
                  "content": r[5]} for r in rows],
    }

"""The inspector's requests: one name per view, string parameters (as an HTTP query carries them), JSON out.

    inspector = Inspector(reader)
    inspector.get("timeline", {"agent": "demo-agent", "discussion": "acme"})

The served page asks these over HTTP (`/inspect/api/<view>?…`); a report file carries the answers to the
requests its page will make (`snapshot`), under the same keys (`request_key`), so the page has one way
of asking. A bad parameter is an `InspectError` (HTTP 400, exit code 2), naming the parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping
from urllib.parse import quote

from engram.inspect import curves, discussion, graph, recall, timeline, working
from engram.inspect.source import MemoryReader
from engram.kernel.ids import InvalidIdError, validate_agent, validate_discussion

# What a report file holds at most (the served page asks for anything): lineage of timeline items, curves
# of listed traces, pages of the trace list.
LINEAGE_CAP = 600
CURVE_CAP = 150


class InspectError(ValueError):
    """A request the inspector cannot answer as asked (bad view, parameter or value)."""


class BadId(InspectError):
    """A parameter naming an agent or discussion with an id that is not a safe id."""


class NotFound(LookupError):
    """The request is well formed but names nothing that exists (an unknown seq or trace)."""


@dataclass(frozen=True)
class Param:
    name: str
    kind: Callable[[str], object]
    required: bool = False


def _agent(v: str) -> str:
    return validate_agent(v)


def _discussion(v: str) -> str:
    return validate_discussion(v)


def _int(lo: int, hi: int) -> Callable[[str], int]:
    def parse(v: str) -> int:
        n = int(v)
        if not lo <= n <= hi:
            raise ValueError(f"must be within {lo}..{hi}")
        return n

    return parse


def _flag(v: str) -> bool:
    if v in ("1", "true"):
        return True
    if v in ("0", "false"):
        return False
    raise ValueError("must be 1 or 0")


def _order(v: str) -> str:
    if v not in ("strongest", "weakest"):
        raise ValueError("must be strongest or weakest")
    return v


def _text(v: str) -> str:
    if len(v) > 2_000:
        raise ValueError("is longer than 2,000 characters")
    return v


_AGENT = Param("agent", _agent, True)
_BIG = 2**62
VIEWS: dict[str, tuple[Param, ...]] = {
    "overview": (_AGENT, Param("discussion", _discussion)),
    "timeline": (_AGENT, Param("discussion", _discussion), Param("limit", _int(1, 100_000))),
    "lineage": (_AGENT, Param("seq", _int(1, _BIG), True)),
    "forgetting": (_AGENT,),
    "curve": (_AGENT, Param("trace", _text, True)),
    "traces": (_AGENT, Param("order", _order), Param("offset", _int(0, _BIG)), Param("limit", _int(1, 1_000)),
               Param("inactive", _flag)),
    "graph": (_AGENT, Param("max_nodes", _int(1, 5_000)), Param("inactive", _flag)),
    "recall": (_AGENT, Param("query", _text, True), Param("discussion", _discussion), Param("limit", _int(1, 100)),
               Param("hyde", _flag)),
    "working": (_AGENT, Param("discussion", _discussion)),
    "discussion": (_AGENT, Param("discussion", _discussion, True)),
    "messages": (_AGENT, Param("discussion", _discussion, True), Param("first_seq", _int(0, _BIG)),
                 Param("last_seq", _int(0, _BIG)), Param("offset", _int(0, _BIG)), Param("limit", _int(1, 1_000))),
}


# The views that read a discussion they are given (recall takes one as a filter of the agent's own traces).
DISCUSSION_VIEWS = ("overview", "timeline", "working", "discussion", "messages")


def request_key(view: str, params: Mapping[str, object]) -> str:
    """`view?a=1&b=x`: parameters sorted, None left out, values encoded as JavaScript's encodeURIComponent does."""
    parts = [f"{k}={quote(str(v), safe=chr(39) + '-_.!~*()')}" for k, v in sorted(params.items()) if v is not None]
    return view + ("?" + "&".join(parts) if parts else "")


def parse(view: str, params: Mapping[str, str]) -> dict[str, object]:
    spec = VIEWS.get(view)
    if spec is None:
        raise InspectError(f"unknown view {view!r}; views: {', '.join(VIEWS)}")
    known = {p.name: p for p in spec}
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise InspectError(f"{view}: unknown parameter {unknown[0]!r}; parameters: {', '.join(known)}")
    out: dict[str, object] = {}
    for p in spec:
        raw = params.get(p.name)
        if raw is None or raw == "":
            if p.required:
                raise InspectError(f"{view}: parameter {p.name!r} is required")
            out[p.name] = None
            continue
        try:
            out[p.name] = p.kind(str(raw))
        except InvalidIdError as exc:
            raise BadId(f"{view}: {exc}") from None
        except ValueError as exc:
            raise InspectError(f"{view}: parameter {p.name}={str(raw)[:40]!r} {exc}") from None
    return out


class Inspector:
    def __init__(self, reader: MemoryReader):
        self.reader = reader
        self._views: set[str] | None = None

    def get(self, view: str, params: Mapping[str, str]) -> dict:
        a = parse(view, params)
        if a.get("discussion") is not None and view in DISCUSSION_VIEWS:
            self._require_discussion(str(a["agent"]), str(a["discussion"]))
        return getattr(self, f"_{view}")(a)

    def _require_discussion(self, agent: str, discussion: str) -> None:
        """A discussion the agent has no messages in is not found, whoever else's it may be (the answer names no one)."""
        _, rows = self.reader.sql("SELECT count(*) FROM messages WHERE agent = ? AND discussion_id = ?",
                                  [agent, discussion])
        if not rows or not rows[0][0]:
            raise NotFound(f"agent {agent!r} has no discussion {discussion!r}")

    def has(self, view_name: str) -> bool:
        """Whether the SQL view exists (a fresh home has no projection tables until something is folded)."""
        if self._views is None:
            _, rows = self.reader.sql("SELECT view_name FROM duckdb_views()")
            self._views = {r[0] for r in rows}
        return view_name in self._views

    # ------------------------------------------------------------------ views

    def _overview(self, a) -> dict:
        agent = a["agent"]
        discussions = []
        if self.has("discussions"):
            _, rows = self.reader.sql(
                "SELECT discussion_id, messages, tokens, epoch_us(first_ts), epoch_us(last_ts) FROM discussions "
                "WHERE agent = ? ORDER BY last_seq DESC, discussion_id", [agent])
            discussions = [{"discussion": r[0], "messages": r[1], "tokens": r[2]} for r in rows]
        chosen = a["discussion"] or (discussions[0]["discussion"] if discussions else None)
        if a["discussion"] and a["discussion"] not in {d["discussion"] for d in discussions}:
            raise NotFound(f"agent {agent!r} has no discussion {a['discussion']!r}")
        _, events = self.reader.sql("SELECT count(*), epoch_us(max(ts)) FROM events_raw WHERE agent = ?", [agent])
        traces = [0, 0]
        if self.has("memory_traces"):
            _, rows = self.reader.sql("SELECT count(*) FILTER (WHERE active), count(*) FROM memory_traces WHERE agent = ?",
                                      [agent])
            traces = list(rows[0])
        from engram.events.envelope import iso

        return {"agent": agent, "discussion": chosen, "discussions": discussions, "events": events[0][0],
                "last_ts": iso(events[0][1]) if events[0][1] is not None else None,
                "active_traces": traces[0], "traces": traces[1]}

    def _timeline(self, a) -> dict:
        return timeline.timeline(self.reader, a["agent"], a["discussion"], a["limit"] or timeline.LANE_LIMIT)

    def _lineage(self, a) -> dict:
        found = timeline.lineage(self.reader, a["agent"], a["seq"])
        if found is None:
            raise NotFound(f"agent {a['agent']!r} has no event at seq {a['seq']}")
        return found

    def _forgetting(self, a) -> dict:
        if not self.has("memory_traces"):
            return {"agent": a["agent"], "now": None, "prune_threshold": curves.prune_threshold(self.reader, a["agent"]),
                    "strongest": [], "weakest": [], "active": 0}
        return curves.forgetting(self.reader, a["agent"])

    def _curve(self, a) -> dict:
        found = curves.curve(self.reader, a["agent"], a["trace"]) if self.has("memory_traces") else None
        if found is None:
            raise NotFound(f"agent {a['agent']!r} has no trace {a['trace']!r}")
        return found

    def _traces(self, a) -> dict:
        if not self.has("memory_traces"):
            return {"agent": a["agent"], "order": a["order"] or "strongest", "offset": 0, "limit": 0, "total": 0,
                    "include_inactive": bool(a["inactive"]), "rows": []}
        return curves.traces_page(self.reader, a["agent"], order=a["order"] or "strongest", offset=a["offset"] or 0,
                                  limit=a["limit"] or curves.PAGE, include_inactive=bool(a["inactive"]))

    def _graph(self, a) -> dict:
        if not self.has("memory_traces") or not self.has("trace_edges"):
            return {"agent": a["agent"], "include_inactive": bool(a["inactive"]), "total_nodes": 0,
                    "max_nodes": a["max_nodes"] or graph.MAX_NODES, "nodes": [], "edges": [], "kinds": [], "clusters": []}
        return graph.graph(self.reader, a["agent"], max_nodes=a["max_nodes"] or graph.MAX_NODES,
                           include_inactive=bool(a["inactive"]))

    def _recall(self, a) -> dict:
        try:
            return recall.recall_view(self.reader, a["agent"], a["query"], discussion=a["discussion"], limit=a["limit"],
                                      hyde=True if a["hyde"] is None else a["hyde"])
        except ValueError as exc:
            raise InspectError(f"recall: {exc}") from None

    def _working(self, a) -> dict:
        out = {"working_memory": working.working_memory(self.reader, a["agent"]) if self.has("working_memory") else None,
               "context": None}
        if a["discussion"] is not None:
            out["context"] = working.context_window(self.reader, a["agent"], a["discussion"])
        return out

    def _discussion(self, a) -> dict:
        return discussion.discussion_memory(self.reader, a["agent"], a["discussion"])

    def _messages(self, a) -> dict:
        return discussion.messages(self.reader, a["agent"], a["discussion"], first_seq=a["first_seq"],
                                   last_seq=a["last_seq"], offset=a["offset"] or 0,
                                   limit=a["limit"] or discussion.MESSAGES_PAGE)


def snapshot(inspector: Inspector, agent: str, discussion_id: str | None, queries: list[str]) -> tuple[dict, dict]:
    """(the overview, every answer the page of a report file will ask for, by request key)."""
    out: dict[str, dict] = {}

    def ask(view: str, **params) -> dict:
        params = {k: v for k, v in params.items() if v is not None}
        answer = inspector.get(view, {k: str(v) for k, v in params.items()})
        out[request_key(view, params)] = answer
        return answer

    overview = ask("overview", agent=agent, discussion=discussion_id)
    d = overview["discussion"]
    lanes = ask("timeline", agent=agent, discussion=d)["lanes"]
    # Lineage: every item but messages first (they are what a click most wants explained), newest first.
    items = sorted((i for lane in lanes for i in lane["items"]), key=lambda i: (i["type"] == "MessageAppended", -i["seq"]))
    for seq, answer in timeline.lineages(inspector.reader, agent, [i["seq"] for i in items[:LINEAGE_CAP]]).items():
        out[request_key("lineage", {"agent": agent, "seq": seq})] = answer
    ask("forgetting", agent=agent)
    listed: list[str] = []
    offset = 0
    while len(listed) < CURVE_CAP:
        page = ask("traces", agent=agent, offset=offset or None)
        listed += [r["trace_id"] for r in page["rows"]]
        offset += page["limit"]
        if offset >= page["total"] or not page["rows"]:
            break
    if listed and inspector.has("memory_traces"):
        for tid, answer in curves.curves(inspector.reader, agent, listed[:CURVE_CAP]).items():
            out[request_key("curve", {"agent": agent, "trace": tid})] = answer
    ask("graph", agent=agent)
    for q in queries:
        ask("recall", agent=agent, query=q, discussion=d)
    ask("working", agent=agent, discussion=d)
    if d is not None:
        files = ask("discussion", agent=agent, discussion=d)
        ask("messages", agent=agent, discussion=d)
        for m in files["memories"] or []:
            ask("messages", agent=agent, discussion=d, first_seq=m["first_seq"], last_seq=m["last_seq"])
    return overview, out

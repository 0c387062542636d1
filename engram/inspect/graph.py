"""View 3, the trace graph: traces as nodes (type, strength), typed edges, the clusters schema integration
formed (a schema trace and the episodic traces linked to it by `schema_instance` edges).

The layout is computed here (networkx's force-directed spring layout, seeded, so the same memory is drawn
the same way) and the page only draws it. A large memory is cut to its `max_nodes` strongest traces, with
every schema cluster among them kept whole where the cut allows; the counts say what was left out.
"""

from __future__ import annotations

from engram.inspect.source import MemoryReader
from engram.kernel import records
from engram.memory.cognitive.model import EDGE_KINDS, MemoryTrace

MAX_NODES = 400
LAYOUT_SEED = 7
LAYOUT_ITERATIONS = 50
# Edge weight in the layout: schema_instance pulls a cluster together; the rest at their own weight.
CLUSTER_PULL = 3.0
# A node of the graph: columns of `memory_traces` (checked against `MemoryTrace` at import).
_NODE_COLUMNS = records.columns(MemoryTrace, "t.trace_id AS trace_id", "t.trace_type AS trace_type", "t.category AS category",
                                "t.source_type AS source_type", "t.active AS active", "t.importance AS importance",
                                "t.retrieval_count AS retrieval_count", "t.content AS content")


def graph(reader: MemoryReader, agent: str, *, max_nodes: int = MAX_NODES, include_inactive: bool = False) -> dict:
    where = "s.agent = ?" + ("" if include_inactive else " AND t.active")
    _, total_rows = reader.sql(f"SELECT count(*) FROM trace_strength s JOIN memory_traces t USING (trace_id) WHERE {where}",
                               [agent])
    names, found = reader.sql(
        f"SELECT {_NODE_COLUMNS}, s.strength FROM trace_strength s JOIN memory_traces t USING (trace_id) "
        f"WHERE {where} ORDER BY s.strength DESC, t.trace_id LIMIT ?",
        [agent, max_nodes],
    )
    rows = [dict(zip(names, r)) for r in found]
    ids = [r["trace_id"] for r in rows]
    _, edge_rows = reader.sql(
        "SELECT src, dst, kind, weight FROM trace_edges WHERE agent = ? AND src IN (SELECT unnest(?)) "
        "AND dst IN (SELECT unnest(?)) ORDER BY kind, src, dst",
        [agent, ids, ids],
    )
    _, kind_totals = reader.sql("SELECT kind, count(*) FROM trace_edges WHERE agent = ? GROUP BY kind", [agent])
    clusters: dict[str, list[str]] = {}
    for src, dst, kind, _ in edge_rows:
        if kind == "schema_instance":
            clusters.setdefault(dst, []).append(src)
    cluster_of = {m: schema for schema, members in clusters.items() for m in [schema, *members]}
    pos = layout(ids, [(s, d, CLUSTER_PULL if k == "schema_instance" else max(w, 0.05)) for s, d, k, w in edge_rows])
    nodes = [
        {"id": r["trace_id"], "trace_type": r["trace_type"], "category": r["category"], "source_type": r["source_type"],
         "active": r["active"], "strength": round(r["strength"], 6), "importance": r["importance"],
         "retrievals": r["retrieval_count"], "content": r["content"],
         "x": round(pos[r["trace_id"]][0], 5), "y": round(pos[r["trace_id"]][1], 5), "cluster": cluster_of.get(r["trace_id"])}
        for r in rows
    ]
    content = {r["trace_id"]: r["content"] for r in rows}
    counts = {k: 0 for k in EDGE_KINDS}
    for _, _, kind, _ in edge_rows:
        counts[kind] = counts.get(kind, 0) + 1
    return {
        "agent": agent,
        "include_inactive": include_inactive,
        "total_nodes": total_rows[0][0],
        "max_nodes": max_nodes,
        "nodes": nodes,
        "edges": [{"src": s, "dst": d, "kind": k, "weight": round(w, 4)} for s, d, k, w in edge_rows],
        "kinds": [{"kind": k, "shown": counts.get(k, 0), "total": dict(kind_totals).get(k, 0)} for k in counts],
        "clusters": [
            {"schema": schema, "label": content.get(schema, ""), "members": members,
             "hull": hull([pos[m] for m in [schema, *members]])}
            for schema, members in sorted(clusters.items())
        ],
    }


def layout(ids: list[str], edges: list[tuple[str, str, float]]) -> dict[str, tuple[float, float]]:
    """Node positions in [-1, 1]² (force-directed, deterministic for the same nodes and edges)."""
    import networkx as nx

    if not ids:
        return {}
    g = nx.Graph()
    g.add_nodes_from(ids)
    for s, d, w in edges:
        g.add_edge(s, d, weight=max(w, g.edges[s, d]["weight"]) if g.has_edge(s, d) else w)
    pos = nx.spring_layout(g, seed=LAYOUT_SEED, iterations=LAYOUT_ITERATIONS, weight="weight")
    return {n: (float(x), float(y)) for n, (x, y) in pos.items()}


def hull(points: list[tuple[float, float]], pad: float = 0.05) -> list[list[float]]:
    """A closed polygon around a cluster's positions: the convex hull (Andrew's monotone chain) of each
    position widened to a small diamond, so one or two members still get an area; the page fills it."""
    pts = sorted({(round(x + dx, 5), round(y + dy, 5)) for x, y in points
                  for dx, dy in ((pad, 0.0), (-pad, 0.0), (0.0, pad), (0.0, -pad))})
    if len(pts) < 3:
        return [list(p) for p in pts]

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple[float, float]] = []
    upper: list[tuple[float, float]] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    ring = lower[:-1] + upper[:-1]
    return [list(p) for p in ring + ring[:1]]

"""The trace graph: typed weighted edges, spreading activation, Hebbian co-activation.

Edges carry a kind (`model.EDGE_KINDS`) and a weight in (0, 1]. Activation spreads along edges in
both directions: a memory is as reachable from what it caused as the other way round.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from engram.config import defaults as d
from engram.memory.cognitive.model import EDGE_KINDS, canonical_edge


@dataclass
class Edge:
    src: str
    dst: str
    kind: str
    weight: float
    created_seq: int = 0
    updated_seq: int = 0
    strengthened: int = 0  # how many times it was strengthened after being added


def _neighbour_map() -> defaultdict[str, set[tuple[str, str, str]]]:
    return defaultdict(set)


class TraceGraph:
    def __init__(self) -> None:
        self.edges: dict[tuple[str, str, str], Edge] = {}
        # node -> neighbour -> keys of the edges between them
        self._adj: dict[str, dict[str, set[tuple[str, str, str]]]] = defaultdict(_neighbour_map)

    def __len__(self) -> int:
        return len(self.edges)

    def add(self, src: str, dst: str, kind: str, weight: float, seq: int = 0) -> Edge | None:
        """Add an edge, or raise an existing one's weight to `weight` if that is higher. Self-loops are ignored."""
        if kind not in EDGE_KINDS:
            raise ValueError(f"edge kind {kind!r} is not one of {EDGE_KINDS}")
        if src == dst:
            return None
        key = canonical_edge(src, dst, kind)
        weight = clamp_weight(weight)
        edge = self.edges.get(key)
        if edge is None:
            edge = self.edges[key] = Edge(key[0], key[1], kind, weight, seq, seq)
            self._adj[key[0]][key[1]].add(key)
            self._adj[key[1]][key[0]].add(key)
        elif weight > edge.weight:
            edge.weight = weight
            edge.updated_seq = seq
        return edge

    def strengthen(self, src: str, dst: str, kind: str, delta: float, seq: int = 0) -> Edge | None:
        """Add `delta` to an edge's weight (creating it at `delta`), capped at 1."""
        if src == dst:
            return None
        key = canonical_edge(src, dst, kind)
        edge = self.edges.get(key)
        if edge is None:
            return self.add(src, dst, kind, delta, seq)
        edge.weight = clamp_weight(edge.weight + delta)
        edge.updated_seq = seq
        edge.strengthened += 1
        return edge

    def hebbian(self, ids: Iterable[str], seq: int = 0, rate: float = d.HEBBIAN_RATE) -> list[Edge]:
        """Traces that fired together wire together: w' = w + rate · (1 − w) for each pair."""
        ids = list(dict.fromkeys(ids))
        changed = []
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                key = canonical_edge(a, b, "co_activated")
                edge = self.edges.get(key)
                w = edge.weight if edge else 0.0
                e = self.strengthen(a, b, "co_activated", rate * (1.0 - w), seq)
                if e is not None:
                    changed.append(e)
        return changed

    def remove_node(self, node: str) -> list[Edge]:
        """Drop every edge of `node` (a forgotten trace); returns them."""
        removed = []
        for nbr, keys in self._adj.pop(node, {}).items():
            for key in keys:
                edge = self.edges.pop(key, None)
                if edge is not None:
                    removed.append(edge)
            peer = self._adj.get(nbr)
            if peer is not None:
                peer.pop(node, None)
                if not peer:
                    del self._adj[nbr]
        return removed

    def neighbours(self, node: str) -> list[tuple[str, float]]:
        """(neighbour, strongest edge weight between them), sorted by id for deterministic traversal."""
        out = []
        for nbr, keys in self._adj.get(node, {}).items():
            out.append((nbr, max(self.edges[k].weight for k in keys)))
        out.sort()
        return out

    def links(self, node: str) -> list[str]:
        return sorted(self._adj.get(node, {}))


def clamp_weight(w: float) -> float:
    return max(0.0, min(1.0, float(w)))


def spread(
    graph: TraceGraph,
    seeds: Mapping[str, float],
    *,
    hop_decay: float = d.SPREAD_HOP_DECAY,
    floor: float = d.SPREAD_FLOOR,
    cap: float = d.SPREAD_CAP,
    max_depth: int = d.SPREAD_MAX_DEPTH,
    max_results: int = d.SPREAD_MAX_RESULTS,
    active: Callable[[str], bool] | None = None,
    fan: bool = True,
) -> dict[str, float]:
    """Spreading activation, breadth-first from `seeds` (trace -> initial activation).

    Each hop, a node passes activation · edge weight · hop_decay to each neighbour; contributions
    below `floor` are skipped; what a node receives is summed and capped at `cap`. At most
    `max_depth` hops; after the first, activation only moves outward (no echo back to where it came
    from). With `fan`, a node's activation is divided among its links (the sum of their weights, at
    least 1). Returns the `max_results` most activated traces (a seed is among them when another
    seed links to it), activation in (0, cap].
    """
    received: dict[str, float] = {}
    frontier = {k: min(cap, v) for k, v in seeds.items() if v > 0}
    visited_at: dict[str, int] = {k: 0 for k in frontier}
    for depth in range(1, max_depth + 1):
        incoming: dict[str, float] = defaultdict(float)
        for node in sorted(frontier):
            a = frontier[node]
            nbrs = [(n, w) for n, w in graph.neighbours(node) if active is None or active(n)]
            # The fan effect (ACT-R): a node's activation is shared among its links, so hubs do not flood the graph.
            share = 1.0 / max(1.0, sum(w for _, w in nbrs)) if fan else 1.0
            for nbr, w in nbrs:
                if depth > 1 and visited_at.get(nbr, depth) < depth:
                    continue  # no echo: after the first hop, activation only moves outward
                contribution = a * w * hop_decay * share
                if contribution < floor:
                    continue
                incoming[nbr] += contribution
        if not incoming:
            break
        nxt = {}
        for node, amount in incoming.items():
            received[node] = min(cap, received.get(node, 0.0) + amount)
            # A node spreads further only the first time it is reached (breadth-first, no echo back and forth).
            if node not in visited_at:
                visited_at[node] = depth
                nxt[node] = min(cap, amount)
        frontier = nxt
    ranked = sorted(received.items(), key=lambda kv: (-kv[1], kv[0]))[:max_results]
    return dict(ranked)

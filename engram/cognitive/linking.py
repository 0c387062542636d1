"""The edges a trace gets when it is encoded.

- temporal_sequence: from the previous trace of the same discussion, when it was encoded within
  TEMPORAL_EDGE_WINDOW_S (6 h) before; weight TEMPORAL_EDGE_WEIGHT.
- same_topic: to up to SAME_TOPIC_MAX_EDGES (3) existing traces with cosine >= SAME_TOPIC_SIMILARITY
  (0.6); weight = the cosine.
- shared_entity: to the SHARED_ENTITY_MAX_EDGES (3) most recent traces naming one of its entities;
  weight SHARED_ENTITY_WEIGHT.
Contradiction, supersession, causation and schema edges come from the Reflector and Consolidator.
"""

from __future__ import annotations

from engram.config import defaults as d
from engram.events.cognitive import EdgeAdded


def edges_for(
    trace_id: str,
    *,
    encoded_us: int,
    previous: tuple[str, int] | None,
    similar: list[tuple[str, float]],
    sharing_entities: list[str],
) -> list[EdgeAdded]:
    """Edges of a new trace: `previous` = (trace, encoded at) of its discussion; `similar` = nearest (id, cosine)."""
    out: list[EdgeAdded] = []
    linked: set[tuple[str, str]] = set()

    def add(src: str, dst: str, kind: str, weight: float) -> None:
        if src != dst and (kind, min(src, dst) + max(src, dst)) not in linked:
            linked.add((kind, min(src, dst) + max(src, dst)))
            out.append(EdgeAdded(src=src, dst=dst, kind=kind, weight=round(weight, 6)))

    if previous is not None and 0 <= encoded_us - previous[1] <= d.TEMPORAL_EDGE_WINDOW_S * 1_000_000:
        add(previous[0], trace_id, "temporal_sequence", d.TEMPORAL_EDGE_WEIGHT)
    topical = [(tid, cos) for tid, cos in similar if cos >= d.SAME_TOPIC_SIMILARITY]
    for tid, cos in sorted(topical, key=lambda x: (-x[1], x[0]))[: d.SAME_TOPIC_MAX_EDGES]:
        add(tid, trace_id, "same_topic", min(1.0, cos))
    for tid in sharing_entities[: d.SHARED_ENTITY_MAX_EDGES]:
        add(tid, trace_id, "shared_entity", d.SHARED_ENTITY_WEIGHT)
    return out

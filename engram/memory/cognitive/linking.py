"""The edges a trace gets when it is encoded.

- temporal_sequence: from the previous trace of the same discussion, when it was encoded within
  TEMPORAL_EDGE_WINDOW_S (6 h) before; weight TEMPORAL_EDGE_WEIGHT.
- same_topic: to up to SAME_TOPIC_MAX_EDGES (3) existing traces with cosine >= SAME_TOPIC_SIMILARITY
  (0.6); weight = the cosine.
- shared_entity: to the SHARED_ENTITY_MAX_EDGES (3) most recent traces naming one of its entities;
  weight SHARED_ENTITY_WEIGHT.
Contradiction, supersession, causation and schema edges come from the Reflector and Consolidator.
Every one of these edges goes from another trace to the new one, so they are recorded inside the new
trace's `TraceEncoded` (`links`) instead of as one `EdgeAdded` event each.
"""

from __future__ import annotations

from engram.config import defaults as d
from engram.events.cognitive import Link


def edges_for(
    trace_id: str,
    *,
    encoded_us: int,
    previous: tuple[str, int] | None,
    similar: list[tuple[str, float]],
    sharing_entities: list[str],
) -> tuple[Link, ...]:
    """Edges of a new trace, each from another trace to it (recorded in its `TraceEncoded.links`):
    `previous` = (trace, encoded at) of its discussion; `similar` = nearest (id, cosine)."""
    out: list[Link] = []
    linked: set[tuple[str, str]] = set()

    def add(src: str, kind: str, weight: float) -> None:
        if src != trace_id and (kind, src) not in linked:
            linked.add((kind, src))
            out.append(Link(src=src, kind=kind, weight=round(weight, 6)))

    if previous is not None and 0 <= encoded_us - previous[1] <= d.TEMPORAL_EDGE_WINDOW_S * 1_000_000:
        add(previous[0], "temporal_sequence", d.TEMPORAL_EDGE_WEIGHT)
    topical = [(tid, cos) for tid, cos in similar if cos >= d.SAME_TOPIC_SIMILARITY]
    for tid, cos in sorted(topical, key=lambda x: (-x[1], x[0]))[: d.SAME_TOPIC_MAX_EDGES]:
        add(tid, "same_topic", min(1.0, cos))
    for tid in sharing_entities[: d.SHARED_ENTITY_MAX_EDGES]:
        add(tid, "shared_entity", d.SHARED_ENTITY_WEIGHT)
    return tuple(out)

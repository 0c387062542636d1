"""The same decisions in fewer events: adjacent edges and reinforcements of one time and stream, merged.

A policy that decides many small changes at once (a consolidation boundary's co-activation edges and
spaced-repetition reviews, a schema and its members' edges) would otherwise append one event each,
and every event is encoded, committed, read back and folded by every consumer of trace events.
`compact` merges, without changing what any fold makes of them (`engram.memory.cognitive.book.TraceBook`
folds each merged shape exactly as the run of events it replaces, in the same order):

- a `TraceEncoded` followed by `EdgeAdded` events into that trace → the trace with them as `links`;
- a run of two or more `EdgeAdded` / `EdgesAdded` → one `EdgesAdded`;
- a run of two or more `TraceReinforced` / `TracesReinforced` → one `TracesReinforced`.

Only neighbours of the same group (the caller's key: stream, event time and cause) merge, so order and
placement are kept. The merged event's id is derived from the ids it replaces (the first one, how many
more, and a digest of all): deciding the same run again gives the same id, which the log refuses as a
duplicate, as it would have refused each of the ids it stands for.
"""

from __future__ import annotations

import hashlib
from typing import Hashable, Sequence, TypeVar

import msgspec

from engram.events.base import Event
from engram.events.cognitive import (
    EdgeAdded,
    EdgesAdded,
    Link,
    NewEdge,
    Reinforcement,
    TraceEncoded,
    TraceReinforced,
    TracesReinforced,
)

# (group, event id, event): the group is whatever must be equal for two events to merge; it comes back as given.
G = TypeVar("G", bound=Hashable)
Item = tuple[G, str, Event]


def _edges(e: Event) -> tuple[NewEdge, ...] | None:
    if isinstance(e, EdgeAdded):
        return (NewEdge(src=e.src, dst=e.dst, kind=e.kind, weight=e.weight),)
    if isinstance(e, EdgesAdded):
        return e.edges
    return None


def _reinforcements(e: Event) -> tuple[Reinforcement, ...] | None:
    if isinstance(e, TraceReinforced):
        return (Reinforcement(trace_id=e.trace_id, reason=e.reason),)
    if isinstance(e, TracesReinforced):
        return e.items
    return None


def merged_id(ids: Sequence[str]) -> str:
    digest = hashlib.blake2b("\n".join(ids).encode(), digest_size=6).hexdigest()
    return f"{ids[0]}+{len(ids) - 1}:{digest}"


def compact(items: Sequence[Item[G]]) -> list[Item[G]]:
    """`items` with adjacent mergeable events of one group merged (see the module docstring)."""
    out: list[Item[G]] = []
    i, n = 0, len(items)
    while i < n:
        group, event_id, event = items[i]
        if isinstance(event, TraceEncoded):
            links = list(event.links)
            j = i + 1
            while j < n and items[j][0] == group and isinstance(e := items[j][2], EdgeAdded) \
                    and e.dst == event.trace_id:
                links.append(Link(src=e.src, kind=e.kind, weight=e.weight))
                j += 1
            out.append((group, event_id, msgspec.structs.replace(event, links=tuple(links)) if j > i + 1 else event))
            i = j
            continue
        for parts, make in ((_edges, lambda xs: EdgesAdded(edges=xs)),
                            (_reinforcements, lambda xs: TracesReinforced(items=xs))):
            if parts(event) is None:
                continue
            j = i + 1
            while j < n and items[j][0] == group and parts(items[j][2]) is not None:
                j += 1
            if j > i + 1:
                merged = tuple(x for _, _, e in items[i:j] for x in parts(e) or ())
                out.append((group, merged_id([item[1] for item in items[i:j]]), make(merged)))
            else:
                out.append(items[i])
            i = j
            break
        else:
            out.append(items[i])
            i += 1
    return out

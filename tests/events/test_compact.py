"""Compact event shapes: a run of edges and reinforcements recorded as one event folds, reads back and
shows in SQL exactly as the events it replaces; logs written in the old shapes still fold the same."""

from __future__ import annotations

import dataclasses

import msgspec
from tests.memory.cognitive.helpers import HOUR_US, T0, rec

from engram.config.home import ProjectionPaths
from engram.events import codec
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
from engram.events.compact import compact, merged_id
from engram.events.envelope import NewEvent, Write
from engram.memory.cognitive.book import TraceBook
from engram.shard.host import ShardHost
from engram.sql import HomeFiles, run_readonly


def encoded(tid: str) -> TraceEncoded:
    return TraceEncoded(
        trace_id=tid, content=f"memory {tid}", trace_type="episodic", scope="discussion", scope_id="d",
        source_type="user_statement", source_seqs=(1,), importance=0.5, confidence=0.8, strength=0.5,
        stability_s=3600.0, interval_s=3600.0, source_message_ids=("m1",),
    )


def old_shape_log() -> list[tuple[tuple[str, int], str, object]]:
    """(group, id, event) as a log written before the compact shapes held them: one event per edge and review."""
    t1, t2 = T0, T0 + 2 * HOUR_US
    return [
        (("d", T0), "trace:a", encoded("a")),
        (("d", T0), "trace:b", encoded("b")),
        (("d", T0), "edge:a:b:temporal_sequence", EdgeAdded(src="a", dst="b", kind="temporal_sequence", weight=0.6)),
        (("d", T0), "edge:a:b:shared_entity", EdgeAdded(src="a", dst="b", kind="shared_entity", weight=0.5)),
        (("d", t1), "trace:c", encoded("c")),
        (("d", t1), "edge:b:c:same_topic", EdgeAdded(src="b", dst="c", kind="same_topic", weight=0.9)),
        (("d", t2), "edge:a:c:co_activated", EdgeAdded(src="a", dst="c", kind="co_activated", weight=0.3)),
        (("d", t2), "edge:c:a:contradicts", EdgeAdded(src="c", dst="a", kind="contradicts", weight=1.0)),
        (("d", t2), "review:a", TraceReinforced(trace_id="a", reason="spaced repetition (review interval 1 h)")),
        (("d", t2), "review:b", TraceReinforced(trace_id="b", reason="spaced repetition (review interval 1 h)")),
        (("e", t2), "review:c", TraceReinforced(trace_id="c", reason="spaced repetition (review interval 1 h)")),
    ]


def fold(items) -> TraceBook:
    book = TraceBook("a", track=True)
    for seq, ((stream, ts_us), _, event) in enumerate(items, 1):
        book.apply(rec(event, seq=seq, ts_us=ts_us, stream=stream))
    return book


def without_seqs(book: TraceBook):
    traces = {tid: {k: v for k, v in dataclasses.asdict(t).items() if k != "last_seq"} for tid, t in book.traces.items()}
    edges = {(e.src, e.dst, e.kind, e.weight, e.strengthened) for e in book.graph.edges.values()}
    changes = [(c.trace_id, c.change, c.ts_us, c.strength_before, c.strength_after, c.stability_s, c.detail)
               for c in book.changes]
    return traces, edges, changes


def test_a_run_of_edges_and_reviews_becomes_one_event_each_and_a_traces_edges_ride_on_it():
    out = compact(old_shape_log())
    assert [type(e).__name__ for _, _, e in out] == [
        "TraceEncoded", "TraceEncoded", "TraceEncoded", "EdgesAdded", "TracesReinforced", "TraceReinforced",
    ]
    b, c = out[1][2], out[2][2]
    assert b.links == (Link("a", "temporal_sequence", 0.6), Link("a", "shared_entity", 0.5))
    assert c.links == (Link("b", "same_topic", 0.9),)
    assert out[3][2].edges == (NewEdge("a", "c", "co_activated", 0.3), NewEdge("c", "a", "contradicts", 1.0))
    assert [r.trace_id for r in out[4][2].items] == ["a", "b"]  # the review in stream "e" stays apart
    assert out[1][1] == "trace:b" and out[3][1] == merged_id(["edge:a:c:co_activated", "edge:c:a:contradicts"])


def test_deciding_the_same_run_again_gives_the_same_ids_and_a_different_run_different_ones():
    ids = [i for _, i, _ in compact(old_shape_log())]
    assert ids == [i for _, i, _ in compact(old_shape_log())]
    shorter = [x for x in old_shape_log() if x[1] != "review:b"]
    assert [i for _, i, _ in compact(shorter)][4] == "review:a" and len(set(ids)) == len(ids)


def test_compact_events_fold_exactly_as_the_events_they_replace():
    old, new = fold(old_shape_log()), fold(compact(old_shape_log()))
    assert without_seqs(new) == without_seqs(old)
    assert new.traces["a"].contradicted_by == ("c",) and new.traces["a"].links == {"b", "c"}
    assert [c.change for c in new.changes if c.trace_id == "a"] == ["encoded", "reinforced"]


def test_old_payloads_without_links_decode_with_none_and_the_new_shapes_round_trip():
    old = codec.encode(encoded("a"))
    payload = msgspec.json.decode(old)
    payload.pop("links", None)
    assert codec.decode("TraceEncoded", 1, msgspec.json.encode(payload).decode()).links == ()
    with_links = msgspec.structs.replace(encoded("b"), links=(Link("a", "temporal_sequence", 0.6),))
    assert '"links":[["a","temporal_sequence",0.6]]' in codec.encode(with_links)
    for e in (with_links, EdgesAdded(edges=(NewEdge("a", "b", "same_topic", 0.8),)),
              TracesReinforced(items=(Reinforcement("a", "review"),))):
        assert codec.decode(type(e).__name__, 1, codec.encode(e)) == e


def test_sql_lists_every_edge_and_reinforcement_whichever_shape_recorded_it(tmp_path):
    host = ShardHost(tmp_path / "log" / "shard-000.duckdb", tmp_path / "proj")
    try:
        items = old_shape_log()
        old = [NewEvent(event=e, ts_us=ts, event_id=f"old:{i}") for (_, ts), i, e in items]
        new = [NewEvent(event=e, ts_us=ts, event_id=f"new:{i}") for (_, ts), i, e in compact(items)]
        host.append_many([Write("old", "a", tuple(old)), Write("new", "b", tuple(new))])
        host.wait_projections(host.head())
        for view, cols in (("ev_edge_added", "src, dst, kind, weight"), ("ev_trace_reinforced", "trace_id, reason")):
            _, rows = host.query(f"SELECT agent, ts, {cols} FROM {view}")
            by_agent = {a: [r[1:] for r in rows if r[0] == a] for a in ("a", "b")}
            assert by_agent["a"] and sorted(by_agent["a"]) == sorted(by_agent["b"])
        _, rows = host.query("SELECT src, dst, kind, weight, event_id FROM ev_edge_added WHERE agent = 'b' AND dst = 'b'")
        assert sorted(rows) == [("a", "b", "shared_entity", 0.5, "new:trace:b"), ("a", "b", "temporal_sequence", 0.6, "new:trace:b")]
        # The trace_edges projection holds the same edges for both agents.
        _, rows = host.query("SELECT agent, src, dst, kind, weight FROM trace_edges ORDER BY ALL")
        assert [r[1:] for r in rows if r[0] == "a"] == [r[1:] for r in rows if r[0] == "b"] != []
        _, counts = host.query("SELECT agent, count(*) FROM events GROUP BY agent ORDER BY agent")
        assert counts == [("a", 11), ("b", 6)]
    finally:
        host.close()
    # User SQL (read-only, confined, loading only the event types a view reads) lists the same rows.
    files = HomeFiles({0: tmp_path / "log" / "shard-000.duckdb"}, ProjectionPaths(tmp_path / "proj"))
    for view in ("ev_edge_added", "ev_trace_reinforced"):
        rows = run_readonly(f"SELECT agent, count(*) FROM {view} GROUP BY agent ORDER BY agent", files).rows
        assert rows[0][1] == rows[1][1] > 0, view

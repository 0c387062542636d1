"""The inspector's aggregations over a home with a known memory (real log and projections, no Ray)."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest
from tests.inspect.synthetic import AGENT, DISCUSSION, HOUR, MINUTE, T0, large_home, small_home

from engram.config.service import load_service_config
from engram.events.envelope import iso
from engram.inspect.adapter import HomeFilesReader
from engram.inspect.api import InspectError, Inspector, NotFound, request_key
from engram.inspect.graph import hull
from engram.memory.cognitive.decay import ebbinghaus


@pytest.fixture(scope="module")
def inspector(tmp_path_factory):
    home = small_home(tmp_path_factory.mktemp("small"))
    reader = HomeFilesReader(load_service_config(home))
    yield Inspector(reader)
    reader.close()


def get(inspector, view, **params):
    return inspector.get(view, {k: str(v) for k, v in params.items()})


def lane(timeline, key):
    return next(l for l in timeline["lanes"] if l["key"] == key)


def test_timeline_puts_each_event_on_its_lane_and_counts_what_the_log_holds(inspector):
    t = get(inspector, "timeline", agent=AGENT, discussion=DISCUSSION)
    counts = {l["key"]: l["total"] for l in t["lanes"]}
    assert counts == {"messages": 12, "chunk_memories": 2, "summary_updates": 0, "observations_buffered": 0,
                      "observations_active": 0, "reflections": 1, "compactions": 0, "consolidations": 1, "mood": 2}
    assert t["idle_consolidations"] == 1
    assert [i["label"] for i in lane(t, "chunk_memories")["items"]] == ["5 messages → first chunk", "5 messages → second chunk"]
    assert lane(t, "mood")["items"][0]["ts"] == iso(T0 + 20 * HOUR)


def test_a_long_lane_shows_its_latest_items_and_says_how_many_there_are(inspector):
    t = get(inspector, "timeline", agent=AGENT, discussion=DISCUSSION, limit=4)
    messages = lane(t, "messages")
    assert (messages["total"], messages["shown"]) == (12, 4)
    assert [i["label"].split(": ")[1] for i in messages["items"]] == [f"message {i} about Lisbon" for i in range(9, 13)]


def test_lineage_of_a_chunk_memory_names_its_source_messages_and_the_llm_call(inspector):
    t = get(inspector, "timeline", agent=AGENT, discussion=DISCUSSION)
    chunk = lane(t, "chunk_memories")["items"][1]
    lin = get(inspector, "lineage", agent=AGENT, seq=chunk["seq"])
    assert [m["message_id"] for m in lin["messages"]] == ["m6", "m7", "m8", "m9", "m10"]
    assert lin["messages_total"] == 5
    assert lin["llm"][0]["model"] == "offline-heuristic-v1" and lin["llm"][0]["task"] == "summarize_chunk"
    assert lin["event"]["payload"]["summary"] == "second chunk"


def test_lineage_of_an_unknown_seq_is_not_found(inspector):
    with pytest.raises(NotFound, match="no event at seq 999"):
        get(inspector, "lineage", agent=AGENT, seq=999)


def test_forgetting_curve_decays_between_retrievals_and_steps_up_at_each(inspector):
    c = get(inspector, "curve", agent=AGENT, trace="t1")
    curve = c["curve"]
    assert c["prune_threshold"] == 0.05 and c["now"] == iso(T0 + 48 * HOUR)
    assert [e["change"] for e in curve["events"]] == ["retrieved", "reinforced", "retrieved"]
    # The spacing: hours since the previous encoding, retrieval or review.
    assert [e["gap_h"] for e in curve["events"]] == [pytest.approx(2 - 12 / 60, abs=1e-3), 8.0, 20.0]
    # Between encoding and the first retrieval: S0·exp(−Δt/stability) with the encoded S0 and stability.
    encoded = T0 + 12 * MINUTE
    mid = next(i for i, x in enumerate(curve["x"]) if x * 1000 > encoded + HOUR)
    t = curve["x"][mid] * 1000  # epoch ms
    assert curve["y"][mid] == pytest.approx(ebbinghaus(0.5, (t - encoded) / 1e6, 3_600.0), abs=1e-5)
    # At the retrieval the curve drops to what it found, then jumps back to the new S0.
    first = curve["events"][0]
    at = [i for i, x in enumerate(curve["x"]) if iso(x * 1000) == first["ts"]]
    assert curve["y"][at[0]] == pytest.approx(first["before"], abs=1e-6)
    assert curve["y"][at[1]] == pytest.approx(first["after"], abs=1e-6) and first["after"] > first["before"]
    assert iso(curve["x"][-1] * 1000) == c["now"]


def test_curve_of_a_pruned_trace_ends_where_it_was_deleted(inspector):
    curve = get(inspector, "curve", agent=AGENT, trace="t5")["curve"]
    assert curve["active"] is False and curve["events"][-1]["change"] == "pruned"
    assert curve["x"][-1] * 1000 == T0 + 40 * HOUR
    assert curve["y"][-1] == pytest.approx(0.2 * math.exp(-(40 * HOUR - 12 * MINUTE) / 1e6 / 3_600.0), rel=1e-4)


def test_small_multiples_hold_the_strongest_and_weakest_active_traces(inspector):
    f = get(inspector, "forgetting", agent=AGENT)
    strongest = [c["trace_id"] for c in f["strongest"]]
    weakest = [c["trace_id"] for c in f["weakest"]]
    assert f["active"] == 5 and sorted(strongest) == ["s1", "t1", "t2", "t3", "t4"]
    assert strongest[0] == "t1" and weakest[-1] == "t1"  # the retrieved one is the strongest now
    assert [c["strength_now"] for c in f["strongest"]] == sorted((c["strength_now"] for c in f["strongest"]), reverse=True)


def test_trace_list_pages_through_the_traces_by_strength(inspector):
    first = get(inspector, "traces", agent=AGENT, limit=2)
    second = get(inspector, "traces", agent=AGENT, limit=2, offset=2)
    third = get(inspector, "traces", agent=AGENT, limit=2, offset=4)
    ids = [r["trace_id"] for p in (first, second, third) for r in p["rows"]]
    assert first["total"] == 5 and len(ids) == 5 and len(set(ids)) == 5
    everything = get(inspector, "traces", agent=AGENT, inactive=1, order="weakest")
    assert everything["total"] == 6 and everything["rows"][0]["trace_id"] == "t5"


def test_graph_draws_the_schema_cluster_around_its_members(inspector):
    g = get(inspector, "graph", agent=AGENT)
    assert {n["id"] for n in g["nodes"]} == {"t1", "t2", "t3", "t4", "s1"}
    assert {(e["src"], e["dst"], e["kind"]) for e in g["edges"]} == {
        ("t1", "t2", "shared_entity"), ("t2", "t3", "temporal_sequence"), ("t3", "s1", "schema_instance"),
        ("t4", "s1", "schema_instance")}
    (cluster,) = g["clusters"]
    assert cluster["schema"] == "s1" and sorted(cluster["members"]) == ["t3", "t4"] and cluster["label"] == "trips to Sintra"
    nodes = {n["id"]: n for n in g["nodes"]}
    assert {n["cluster"] for n in nodes.values()} == {None, "s1"} and nodes["t3"]["cluster"] == "s1"
    for tid in ("s1", "t3", "t4"):
        assert inside(cluster["hull"], (nodes[tid]["x"], nodes[tid]["y"]))
    kinds = {k["kind"]: k["shown"] for k in g["kinds"]}
    assert kinds["schema_instance"] == 2 and kinds["contradicts"] == 0


def test_a_large_memory_is_cut_to_its_strongest_traces_and_latest_turns(tmp_path):
    home = large_home(tmp_path, traces=300, messages=50)
    reader = HomeFilesReader(load_service_config(home))
    try:
        inspector = Inspector(reader)
        g = get(inspector, "graph", agent=AGENT, max_nodes=40)
        _, rows = reader.sql("SELECT trace_id FROM trace_strength WHERE agent = ? ORDER BY strength DESC, trace_id LIMIT 40", [AGENT])
        assert [n["id"] for n in g["nodes"]] == [r[0] for r in rows]
        assert g["total_nodes"] == 306 and len(g["nodes"]) == 40
        shown = {n["id"] for n in g["nodes"]}
        assert g["edges"] and all(e["src"] in shown and e["dst"] in shown for e in g["edges"])
        # Nothing compacted the 50 messages: the context counts them all and ships the latest 20.
        ctx = get(inspector, "working", agent=AGENT, discussion=DISCUSSION)["context"]
        assert ctx["turns_total"] == 50 and [t["turn"] for t in ctx["turns"]] == list(range(31, 51))
        assert ctx["segments"][-1] == {"name": "recent_turns", "title": "recent turns", "tokens": ctx["recent_tokens"],
                                       "budget": None}
    finally:
        reader.close()


def inside(polygon, point) -> bool:
    x, y = point
    hit = False
    for (x1, y1), (x2, y2) in zip(polygon, polygon[1:]):
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            hit = not hit
    return hit


def test_hull_of_one_or_many_points_encloses_each_of_them():
    for points in ([(0.0, 0.0)], [(0.0, 0.0), (0.5, 0.5)], [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (0.3, 0.3)]):
        ring = hull(points)
        assert ring[0] == ring[-1]
        assert all(inside(ring, p) for p in points)


def test_discussion_memory_shows_the_files_and_the_messages_each_chunk_covers(inspector):
    d = get(inspector, "discussion", agent=AGENT, discussion=DISCUSSION)
    assert [m["summary"] for m in d["memories"]] == ["first chunk", "second chunk"]
    assert d["summary"] is None and d["vector_memories"] is None and d["messages"] == 12
    chunk = d["memories"][0]
    page = get(inspector, "messages", agent=AGENT, discussion=DISCUSSION, first_seq=chunk["first_seq"], last_seq=chunk["last_seq"])
    assert [m["message_id"] for m in page["rows"]] == chunk["message_ids"] == ["m1", "m2", "m3", "m4", "m5"]
    page = get(inspector, "messages", agent=AGENT, discussion=DISCUSSION, offset=10, limit=5)
    assert page["total"] == 12 and [m["message_id"] for m in page["rows"]] == ["m11", "m12"]


def test_recall_from_the_files_alone_says_it_needs_a_running_engram(inspector):
    r = get(inspector, "recall", agent=AGENT, query="Lisbon")
    assert "needs a running engram" in r["unavailable"]


def test_a_bad_request_names_the_parameter(inspector):
    with pytest.raises(InspectError, match="unknown view 'nope'"):
        get(inspector, "nope", agent=AGENT)
    with pytest.raises(InspectError, match="parameter 'seq' is required"):
        get(inspector, "lineage", agent=AGENT)
    with pytest.raises(InspectError, match="limit='0' must be within 1..1000"):
        get(inspector, "traces", agent=AGENT, limit=0)
    with pytest.raises(InspectError, match="path separator"):
        get(inspector, "timeline", agent="../etc")
    with pytest.raises(InspectError, match="unknown parameter 'colour'"):
        get(inspector, "graph", agent=AGENT, colour="red")


def test_request_keys_encode_values_as_the_page_does():
    # encodeURIComponent("où? a&b=c 'x'(y)*!~") in a browser gives this.
    assert request_key("recall", {"query": "où? a&b=c 'x'(y)*!~", "agent": "a", "discussion": None}) == (
        "recall?agent=a&query=o%C3%B9%3F%20a%26b%3Dc%20'x'(y)*!~")


def test_the_inspector_never_imports_ray_or_the_actors():
    package = Path(__file__).resolve().parents[2] / "engram" / "inspect"
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert not (name == "ray" or name.startswith("ray.") or name.startswith("engram.actors")), f"{path.name} imports {name}"

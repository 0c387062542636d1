"""The trace graph: spreading activation and Hebbian co-activation."""

from __future__ import annotations

import pytest

from engram.memory.cognitive.graph import TraceGraph, spread


def chain(*nodes: str, weight: float = 1.0) -> TraceGraph:
    g = TraceGraph()
    for a, b in zip(nodes, nodes[1:]):
        g.add(a, b, "temporal_sequence", weight)
    return g


def test_activation_is_attenuated_by_edge_weight_and_per_hop_decay():
    g = chain("s", "a", "b", weight=0.8)
    act = spread(g, {"s": 1.0}, hop_decay=0.5, floor=0.0, fan=False)
    assert act["a"] == pytest.approx(1.0 * 0.8 * 0.5)
    assert act["b"] == pytest.approx(1.0 * 0.8 * 0.5 * 0.8 * 0.5)  # the decay applies on every hop


def test_contributions_below_the_floor_are_skipped():
    g = chain("s", "a", "b", weight=0.5)
    act = spread(g, {"s": 1.0}, hop_decay=0.5, floor=0.1, fan=False)
    assert act == {"a": 0.25}  # b would get 0.0625 < 0.1


def test_activation_from_several_sources_is_summed_and_capped():
    g = TraceGraph()
    for s in ("s1", "s2", "s3"):
        g.add(s, "hub", "shared_entity", 1.0)
    summed = spread(g, {"s1": 0.5, "s2": 0.5}, hop_decay=0.5, floor=0.0, cap=1.0, fan=False)
    assert summed["hub"] == pytest.approx(0.5)
    capped = spread(g, {"s1": 1.0, "s2": 1.0, "s3": 1.0}, hop_decay=0.5, floor=0.0, cap=1.0, fan=False)
    assert capped["hub"] == 1.0


def test_depth_and_result_count_are_bounded():
    g = chain("s", "a", "b", "c", "d")
    assert set(spread(g, {"s": 1.0}, hop_decay=1.0, floor=0.0, max_depth=2, fan=False)) == {"a", "b"}
    star = TraceGraph()
    for i in range(30):
        star.add("s", f"n{i:02d}", "same_topic", 0.9)
    assert len(spread(star, {"s": 1.0}, floor=0.0, max_results=20, fan=False)) == 20


def test_the_fan_effect_shares_a_hubs_activation_among_its_links():
    star = TraceGraph()
    for i in range(4):
        star.add("s", f"n{i}", "shared_entity", 1.0)
    act = spread(star, {"s": 1.0}, hop_decay=0.5, floor=0.0, fan=True)
    assert act["n0"] == pytest.approx(0.5 / 4)


def test_seeds_linked_to_each_other_activate_each_other_but_nothing_echoes_back():
    g = chain("s1", "s2", "x")
    act = spread(g, {"s1": 1.0, "s2": 0.5}, hop_decay=0.5, floor=0.0, fan=False)
    assert act["s2"] == pytest.approx(0.5) and act["s1"] == pytest.approx(0.25)
    assert act["x"] == pytest.approx(0.25)  # from s2 at the first hop only; s1's path through s2 would echo


def test_inactive_traces_do_not_receive_activation():
    g = chain("s", "gone", "b")
    assert spread(g, {"s": 1.0}, floor=0.0, active=lambda t: t != "gone", fan=False) == {}


def test_hebbian_co_activation_strengthens_the_edge_between_traces_that_fire_together():
    g = TraceGraph()
    g.hebbian(["a", "b", "c"])
    assert g.edges[("a", "b", "co_activated")].weight == pytest.approx(0.1)
    assert len(g) == 3
    g.hebbian(["b", "a"])
    assert g.edges[("a", "b", "co_activated")].weight == pytest.approx(0.1 + 0.1 * 0.9)
    assert g.edges[("a", "c", "co_activated")].weight == pytest.approx(0.1)


def test_edges_are_typed_and_symmetric_kinds_are_stored_once():
    g = TraceGraph()
    g.add("b", "a", "same_topic", 0.7)
    g.add("a", "b", "same_topic", 0.6)
    g.add("b", "a", "supersedes", 1.0)
    assert set(g.edges) == {("a", "b", "same_topic"), ("b", "a", "supersedes")}
    assert g.edges[("a", "b", "same_topic")].weight == 0.7
    with pytest.raises(ValueError):
        g.add("a", "b", "likes", 0.5)
    assert g.neighbours("a") == [("b", 1.0)]
    g.remove_node("a")
    assert len(g) == 0 and g.neighbours("b") == []

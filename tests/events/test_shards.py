"""Agent -> shard routing: a recorded map over rendezvous hashing, and growing it moves only what it must."""

import json

import pytest

from engram.config.home import Home, HomeLayoutError
from engram.kernel.sharding import MODULO, RENDEZVOUS, ReshardError, ShardMap, shard_of

AGENTS = [f"agent-{i}" for i in range(600)]


def test_growing_from_one_to_three_shards_moves_about_two_thirds_and_only_to_new_shards():
    before = ShardMap(1)
    moves = before.plan(3, AGENTS)
    assert all(src == 0 and dst in (1, 2) for src, dst in moves.values())
    assert 0.55 < len(moves) / len(AGENTS) < 0.78
    after = before.grown(3, AGENTS)
    assert {after.shard_of(a) for a in AGENTS} == {0, 1, 2}
    assert all(after.shard_of(a) == (moves[a][1] if a in moves else 0) for a in AGENTS)


def test_growing_three_to_four_moves_agents_of_one_parent_only_and_keeps_the_rest_in_place():
    three = ShardMap(1).grown(3, AGENTS)
    moves = three.plan(4, AGENTS)
    # Shard 3 splits off shard 0 (3 % 3): only shard 0's agents may move, and only to it.
    assert moves and all(src == 0 and dst == 3 for src, dst in moves.values())
    on_zero = [a for a in AGENTS if three.shard_of(a) == 0]
    assert 0.15 < len(moves) / len(on_zero) < 0.6 and len(moves) < len(AGENTS) / 4
    four = three.grown(4, AGENTS)
    assert all(four.shard_of(a) == three.shard_of(a) for a in AGENTS if a not in moves)


def test_recorded_agents_stay_where_they_are_and_new_agents_spread_over_every_shard():
    three = ShardMap(1).grown(3, ["ada"])
    assert three.agents == {"ada": three.shard_of("ada")}
    assert {three.shard_of(f"new-{i}") for i in range(60)} == {0, 1, 2}


def test_shrinking_is_refused_with_a_reason():
    with pytest.raises(ReshardError, match="only adds shards"):
        ShardMap(3).plan(2, AGENTS)


def test_a_home_made_before_the_map_keeps_its_modulo_routing_and_its_layout_is_upgraded(tmp_path):
    (tmp_path / "layout.json").write_text('{"shards": 4}\n')
    layout = Home(tmp_path, 4).layout_check()
    assert layout.hashing == MODULO and layout.shard_of("ada") == shard_of("ada", 4)
    recorded = json.loads((tmp_path / "layout.json").read_text())
    assert recorded["version"] == 2 and recorded["hashing"] == MODULO and recorded["shards"] == 4


def test_a_new_home_records_rendezvous_routing_and_refuses_more_shards_than_it_has(tmp_path):
    assert Home(tmp_path, 2).layout_check().hashing == RENDEZVOUS
    with pytest.raises(HomeLayoutError, match="engram reshard --shards 3"):
        Home(tmp_path, 3).layout_check()


def test_a_resharded_home_opens_with_its_own_count_whatever_the_configuration_says(tmp_path):
    home = Home(tmp_path, 1)
    home.write_layout(ShardMap(1).grown(3, ["ada", "bob"]))
    opened = Home(tmp_path, 1)
    assert opened.layout_check().shards == 3 and opened.shards == 3


def test_a_cluster_layout_places_each_shard_on_one_node_and_is_checked_before_start(tmp_path):
    import json as _json

    from engram.config.errors import ConfigError
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    (tmp_path / "engram.json").write_text(_json.dumps({"shards": 3, "cluster": {"nodes": {"a": [0, 1], "b": [1]}}}))
    with pytest.raises(ConfigError, match="shard 1 is placed on two nodes"):
        load_service_config(tmp_path)
    (tmp_path / "engram.json").write_text(_json.dumps({"shards": 3, "cluster": {"nodes": {"a": [0], "b": [1]}}}))
    with pytest.raises(HomeLayoutError, match="places no node for shard"):
        InProcessRuntime(load_service_config(tmp_path))
    assert not (tmp_path / "log").exists()  # refused before anything started

"""Re-sharding a live home: agents move with their whole streams, at their own positions; nothing lost or doubled."""

from __future__ import annotations

import json

import pytest
from tests.server.test_rest import sample_conversations

from engram.api import types as t
from engram.api.errors import ApiError

AGENTS = [f"agent-{i}" for i in range(9)]


def populate(mem) -> None:
    messages = sample_conversations()[0].messages
    for i, agent in enumerate(AGENTS):
        batch = messages[i * 5:(i + 1) * 5]
        mem.append_conversations(agent, t.AppendConversationsRequest(
            conversations=[t.Conversation(discussion=f"trip-{i}", messages=batch)]))
    assert mem.wait_idle(timeout=600)


def streams_of(mem) -> dict[str, list[tuple]]:
    """Every agent's events as the log holds them (position, stream, version, id, payload); not the shard."""
    return {agent: [(r.seq, r.stream, r.stream_version, r.event_id, r.causation, r.type, r.event)
                    for r in mem.read(agent, limit=None)] for agent in AGENTS}


def counts_by_type(mem) -> dict[str, int]:
    total: dict[str, int] = {}
    for shard in mem.status().shards:
        for type_, n in shard.events_by_type.items():
            total[type_] = total.get(type_, 0) + n
    return total


def reshard(mem, shards: int) -> dict:
    job = mem.jobs.wait(mem.reshard(t.ReshardRequest(shards=shards)).id, timeout=600)
    assert job.state == "succeeded", job.error
    assert job.progress.done == job.progress.total == job.result["events_moved"]
    return job.result


@pytest.fixture
def inprocess(tmp_path):
    yield from open_homes(tmp_path / "home")


@pytest.fixture
def populated(populated_copy):
    """`inprocess` over a copy of a populated home (tests/cluster/conftest.py)."""
    yield from open_homes(populated_copy)


def open_homes(home):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime

    home.mkdir(exist_ok=True)
    opened = []

    def open_home():
        mem = Engram(InProcessRuntime(load_service_config(home), wall_clock=False).start())
        opened.append(mem)
        return mem

    yield home, open_home
    for mem in opened:
        mem.close()


def test_resharding_one_to_three_moves_whole_streams_at_their_positions_and_replay_equals_live(populated):
    home, open_home = populated  # `populate` ran on the session's template (tests/cluster/conftest.py)
    mem = open_home()
    before, types_before = streams_of(mem), counts_by_type(mem)

    report = reshard(mem, 3)

    placed = {a: mem.rt.shard_of(a) for a in AGENTS}
    assert set(placed.values()) == {0, 1, 2}
    assert report["agents_moved"] == sum(1 for s in placed.values() if s != 0)
    assert {a: dst for a, (_, dst) in report["moves"].items()} == {a: s for a, s in placed.items() if s != 0}
    assert streams_of(mem) == before  # every stream intact: same events, same positions, same ids
    assert mem.wait_idle(timeout=600)
    assert counts_by_type(mem) == types_before  # the policies refolded their logs and appended nothing twice
    assert mem.rt.verify_replay(mem.rt.all_shards()) == []
    layout = json.loads((home / "layout.json").read_text())
    assert layout["shards"] == 3 and layout["agents"] == placed


def test_a_resharded_home_reopens_with_its_new_layout_and_new_agents_spread_over_every_shard(populated):
    home, open_home = populated
    mem = open_home()
    reshard(mem, 3)
    before = streams_of(mem)
    mem.close()
    again = open_home()  # engram.json still says nothing about shards: the layout is the truth
    assert again.rt.config.shards == 3 and streams_of(again) == before
    assert {again.rt.shard_of(f"newcomer-{i}") for i in range(40)} == {0, 1, 2}


def test_resharding_to_fewer_or_the_same_shards_is_refused_before_anything_moves(inprocess):
    _, open_home = inprocess
    mem = open_home()
    with pytest.raises(ApiError) as refused:
        mem.reshard(t.ReshardRequest(shards=1))
    assert refused.value.code == "invalid_request" and "only adds shards" in refused.value.message


@pytest.mark.ray
def test_resharding_one_to_three_on_ray_keeps_every_stream_and_replay_equals_live(ray_session, tmp_path):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.ray_runtime import RayRuntime

    home = tmp_path / "home"
    home.mkdir()
    # One Summarizer actor per shard (the default is two): every actor is a process started on two shared cores,
    # three shards' worth of them after the split, and how many host a group is not what re-sharding changes.
    (home / "engram.json").write_text(json.dumps({"ray": {"pools": {"summarizer": 1}}}))
    mem = Engram(RayRuntime(load_service_config(home)).start())
    try:
        populate(mem)
        before, types_before = streams_of(mem), counts_by_type(mem)
        report = reshard(mem, 3)
        assert report["agents_moved"] > 0 and {mem.rt.shard_of(a) for a in AGENTS} == {0, 1, 2}
        assert streams_of(mem) == before
        assert mem.wait_idle(timeout=600)
        live_clock = ("ClockTick", "ConsolidationRan")  # the policy actors' wall clock may tick meanwhile
        assert ({k: v for k, v in counts_by_type(mem).items() if k not in live_clock}
                == {k: v for k, v in types_before.items() if k not in live_clock})
        assert mem.rt.verify_replay(mem.rt.all_shards()) == []
        nodes = json.loads((home / "layout.json").read_text())["nodes"]
        assert sorted(nodes) == ["000", "001", "002"]  # the new shards' nodes are recorded too
    finally:
        mem.close()

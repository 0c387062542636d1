"""The service configuration: home from ENGRAM_HOME, Ray address from RAY_ADDRESS, a validated file."""

import json

import pytest

from engram.config import ConfigError, load_service_config


def test_home_comes_from_engram_home(monkeypatch, tmp_path):
    monkeypatch.setenv("ENGRAM_HOME", str(tmp_path / "h"))
    assert load_service_config().home == (tmp_path / "h").resolve()


def test_default_home_is_dot_engram(monkeypatch, tmp_path):
    monkeypatch.delenv("ENGRAM_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_service_config().home == (tmp_path / ".engram").resolve()


def test_ray_address_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert load_service_config(tmp_path).ray.address == "10.0.0.5:6379"


def test_engram_json_sets_shards_llm_embedder_and_limits(tmp_path):
    (tmp_path / "engram.json").write_text(json.dumps({
        "shards": 4,
        "llm": {"provider": "offline", "endpoints": {"default": {}, "fast": {"model": "claude-haiku-4-5"}}},
        "embedder": {"name": "hashing"},
        "limits": {"maxMessageChars": 5000},
    }))
    c = load_service_config(tmp_path)
    assert c.shards == 4 and c.llm.provider == "offline" and c.llm.endpoints["fast"].model == "claude-haiku-4-5"
    assert c.embedder.name == "hashing" and c.limits.max_message_chars == 5000


def test_a_typo_in_engram_json_is_an_error(tmp_path):
    (tmp_path / "engram.json").write_text('{"shard": 4}')
    with pytest.raises(ConfigError, match="unknown key 'shard'; did you mean 'shards'"):
        load_service_config(tmp_path)


def test_pool_sizes_name_known_policy_groups(tmp_path):
    from engram.policies.registry import members

    (tmp_path / "engram.json").write_text(json.dumps({"ray": {"pools": {"summarizer": 4}}}))
    pools = load_service_config(tmp_path).ray.pools
    assert members("summarizer", pools) == 4 and members("traces", pools) == 1
    (tmp_path / "engram.json").write_text(json.dumps({"ray": {"pools": {"sumarizer": 4}}}))
    with pytest.raises(ConfigError, match="unknown policy group.*sumarizer.*the groups are summarizer"):
        load_service_config(tmp_path)
    (tmp_path / "engram.json").write_text(json.dumps({"ray": {"pools": {"summarizer": 0}}}))
    with pytest.raises(ConfigError, match="greater than or equal to 1"):
        load_service_config(tmp_path)


def test_policy_processes_host_the_listed_groups_together_and_every_member_once(tmp_path):
    from engram.policies.registry import GROUPS, PROCESSES, process_role, processes

    def hosted(layout):
        return sorted(slot for slots in layout for slot in slots)

    every = sorted((g, m) for g in GROUPS for m in range(GROUPS[g][0]))
    default = processes({})
    assert hosted(default) == every  # each group member hosted once
    shared = [slots for slots in default if len(slots) > 1]
    assert [sorted({g for g, _ in slots}) for slots in shared] == [sorted(PROCESSES[0])]
    assert [("traces", 0)] in default and [("auto-ingest", 0)] in default  # the turn's path keeps its processes
    assert process_role([("traces", 0)], 2) == "traces-002-000"  # a process of one member: its old name
    assert process_role(shared[0], 1).endswith("-001")
    assert len(processes({}, [])) == len(every)  # []: a process per group member, as before
    three = processes({"summarizer": 3}, [["observer", "context"]])
    assert hosted(three) == sorted((g, m) for g in GROUPS for m in range({"summarizer": 3}.get(g, GROUPS[g][0])))
    assert [("context", 0), ("observer", 0)] in three

    (tmp_path / "engram.json").write_text(json.dumps({"ray": {"processes": [["observer", "context"]]}}))
    assert load_service_config(tmp_path).ray.processes == [["observer", "context"]]
    (tmp_path / "engram.json").write_text(json.dumps({"ray": {"processes": [["observer", "contxt"]]}}))
    with pytest.raises(ConfigError, match="unknown policy group.*contxt"):
        load_service_config(tmp_path)
    (tmp_path / "engram.json").write_text(json.dumps({"ray": {"processes": [["observer"], ["observer", "context"]]}}))
    with pytest.raises(ConfigError, match="observer listed more than once"):
        load_service_config(tmp_path)

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

"""agent.config.json: Wunderland's sections, HEXACO, PAD, and the key-threshold table as defaults."""

import json

import pytest

from engram.config import AgentConfig, ConfigError, load
from engram.config import defaults as d


def test_the_key_threshold_table_is_the_default():
    c = AgentConfig()
    assert c.memory.observer.activation_tokens == 30_000
    assert c.memory.reflector.activation_tokens == 40_000
    assert c.memory.working_memory.capacity == 7
    assert c.memory.encoding.flashbulb_threshold == 0.8
    assert c.memory.decay.prune_threshold == 0.05
    assert c.memory.decay.recency_half_life_hours == 24
    assert c.memory.consolidation.interval_hours == 1
    assert c.memory.infinite_context.compaction_threshold == 0.75
    assert c.memory.infinite_context.preserve_recent_turns == 20
    assert c.storage.auto_ingest.importance_threshold == 0.4
    assert c.storage.auto_ingest.max_per_turn == 3
    assert c.storage.auto_ingest.deduplication_threshold == 0.85
    assert (d.FLASHBULB_STRENGTH_MULTIPLIER, d.FLASHBULB_STABILITY_MULTIPLIER) == (2.0, 5.0)


def test_the_guides_sections_load_as_written(tmp_path):
    path = tmp_path / "agent.config.json"
    path.write_text(json.dumps({
        "memory": {"infiniteContext": {"enabled": True, "strategy": "hierarchical", "compactionThreshold": 0.75,
                                       "preserveRecentTurns": 20, "transparencyLevel": "full",
                                       "maxSummaryChainTokens": 2000, "targetCompressionRatio": 8}},
        "storage": {"autoIngest": {"enabled": True, "importanceThreshold": 0.4, "maxPerTurn": 3}},
        "rag": {"hyde": {"enabled": True, "initialThreshold": 0.7, "minThreshold": 0.3, "adaptiveThreshold": True}},
        "personality": {"openness": 0.9, "conscientiousness": 0.2},
        "mood": {"valence": 0.3, "arousal": -0.2, "dominance": 0.1},
    }))
    c = load(AgentConfig, path)
    assert c.memory.infinite_context.strategy == "hierarchical"
    assert c.rag.hyde.initial_threshold == 0.7 and c.rag.hyde.min_threshold == 0.3
    assert c.personality.openness == 0.9 and c.personality.honesty == 0.5
    assert (c.mood.valence, c.mood.arousal, c.mood.dominance) == (0.3, -0.2, 0.1)


def test_an_unknown_nested_key_names_its_path_and_the_closest_key(tmp_path):
    path = tmp_path / "agent.config.json"
    path.write_text('{"memory": {"infiniteContext": {"compactionTreshold": 0.5}}}')
    with pytest.raises(ConfigError) as err:
        load(AgentConfig, path)
    assert "unknown key 'memory.infiniteContext.compactionTreshold'; did you mean 'compactionThreshold'?" in str(err.value)


def test_out_of_range_values_name_the_field_path():
    with pytest.raises(Exception, match="personality.openness"):
        AgentConfig.model_validate({"personality": {"openness": 1.5}})
    with pytest.raises(Exception, match="memory.infiniteContext.strategy"):
        AgentConfig.model_validate({"memory": {"infiniteContext": {"strategy": "forgetful"}}})

"""`engram init`, `engram compactions` and `engram context` as a user runs them (separate processes)."""

from __future__ import annotations

import json

import pytest
from tests.cli.helpers import engram
from tests.memory.context.helpers import LocalContext, conversation
from tests.server.helpers import served_home

from engram.config.agent import AgentConfig
from engram.config.loader import load


def test_init_writes_the_defaults_loadably_and_never_overwrites_without_force(home_dir):
    out = engram(home_dir, "init", "scout")
    assert out.returncode == 0, out.stderr
    path = home_dir / "agents" / "scout" / "agent.config.json"
    assert str(path) in out.stdout and "engram chat --agent scout" in out.stdout
    text = path.read_text()
    assert text.startswith("// engram agent configuration for 'scout'")
    assert '"infiniteContext"' in text and '"compactionThreshold": 0.75' in text and '"preserveRecentTurns": 20' in text
    assert load(AgentConfig, path) == AgentConfig()
    path.write_text(text.replace('"strategy": "sliding"', '"strategy": "hybrid"'))
    again = engram(home_dir, "init", "scout")
    assert again.returncode == 2 and "--force" in again.stderr
    assert load(AgentConfig, path).memory.infinite_context.strategy == "hybrid"  # untouched
    forced = engram(home_dir, "init", "scout", "--force")
    assert forced.returncode == 0 and load(AgentConfig, path) == AgentConfig()
    bad = engram(home_dir, "init", "../escape")
    assert bad.returncode == 2


def _home_with_compactions(home_dir):
    engine = LocalContext(home_dir, agent_config={"memory": {"infiniteContext": {
        "contextWindowTokens": 2_000, "strategy": "hierarchical", "maxSummaryChainTokens": 100}}})
    try:
        engine.append(conversation(100))
    finally:
        engine.close()


@pytest.mark.server
def test_compactions_shows_each_compaction_and_the_chain_with_what_was_dropped(home_dir):
    _home_with_compactions(home_dir)
    with served_home(home_dir):
        compactions_shown(home_dir)


def compactions_shown(home_dir) -> None:
    out = engram(home_dir, "compactions", "--discussion", "d")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("compactions of discussion d: ")
    assert "latest strategy hierarchical, transparency full" in text
    assert "threshold" in text and "chain" in text and "[L1: turns 1-" in text
    assert "chain now: " in text and "└── [L0: turns" in text
    assert "dropped m" in text  # dropped messages named, with their text from the log
    data = json.loads(engram(home_dir, "compactions", "--discussion", "d", "--json").stdout)
    comps = data["compactions"]
    assert comps and {"compression_ratio", "dropped", "preserved_entities", "traces_created", "duration_ms",
                      "context_tokens_before", "label"} <= set(comps[0])
    first = comps[0]
    assert first["trigger"] == "threshold" and first["compression_ratio"] > 5
    assert first["dropped_content"] and first["dropped_content"][0]["text"].startswith(("Priya", "Marco", "The ", "They "))
    chain = data["chain"]
    assert chain["nodes"] and chain["tokens"] <= 100 and chain["first_turn"] == 1
    assert chain["compression_ratio"] == round(chain["covered_tokens"] / chain["tokens"], 2)
    empty = engram(home_dir, "compactions", "--discussion", "other")
    assert empty.returncode == 2 and "discussion 'other' is not known" in empty.stderr


@pytest.mark.server
def test_context_prints_the_chain_then_the_recent_turns_within_the_budgets(home_dir):
    _home_with_compactions(home_dir)
    with served_home(home_dir):
        context_shown(home_dir)


def context_shown(home_dir) -> None:
    out = engram(home_dir, "context", "--discussion", "d", "--no-recall")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("context of discussion d (agent a): ")
    assert "of a 2,000-token window" in text and "compaction threshold 1,500" in text
    assert text.index("--- compaction chain ---") < text.index("--- recent turns (turns ")
    data = json.loads(engram(home_dir, "context", "--discussion", "d", "--no-recall", "--json").stdout)
    turns = data["turns"]
    assert len(turns) >= 20 and turns[-1]["turn"] == 100
    assert [t["turn"] for t in turns] == list(range(turns[0]["turn"], 101))  # everything after the chain, raw
    chain = next(b for b in data["blocks"] if b["name"] == "chain")
    assert chain["text"].startswith("[L") and chain["tokens"] <= 100
    wm = next(b for b in data["blocks"] if b["name"] == "working_memory")
    assert wm["budget"] == 100  # 5% of the window
    assert data["conversation_tokens"] <= 1_500 + turns[-1]["content"].__len__()
    missing = engram(home_dir, "context", "--discussion", "nope", "--no-recall")
    assert missing.returncode == 2 and "discussion 'nope' is not known" in missing.stderr

"""Forgetting a discussion forgets what the background processes derived from it, in their state and in
the projections; the other discussion's observations, traces and consolidation stay."""

from __future__ import annotations

import pytest
from tests.memory.background.harness import BACKGROUND, Pipeline, services
from tests.memory.background.synthetic import DAY_US, Message, conversation

from engram.config.llm import EmbedderConfig
from engram.policies.auto_ingest import AutoIngest
from engram.policies.consolidator import Consolidator
from engram.policies.observer import Observer
from engram.policies.reflector import Reflector
from engram.providers.embeddings import make_embedder

AGENT = "maya"
CONFIG = {"memory": {"observer": {"activationTokens": 2_000, "bufferTokens": 500}, "reflector": {"activationTokens": 300}}}


def shifted(messages: list[Message], days: int) -> list[Message]:
    return [Message(m.role, m.content, m.ts_us + days * DAY_US, m.name, f"b-{m.message_id}") for m in messages]


@pytest.fixture(scope="module")
def forgotten(tmp_path_factory):
    svc = services(make_embedder(EmbedderConfig(name="hashing")))
    p = Pipeline(tmp_path_factory.mktemp("forget"), svc, policies=(AutoIngest,) + BACKGROUND)
    first = [m for s in conversation(6_000, seed=1, session_tokens=3_000) for m in s]
    second = shifted([m for s in conversation(6_000, seed=2, session_tokens=3_000) for m in s], 1)
    p.configure(AGENT, CONFIG, first[0].ts_us - 1)
    p.say(AGENT, "kept", first)
    p.say(AGENT, "gone", second)
    p.settle()
    before = {t: n for t, n in p.sql("SELECT stream, count(*) FROM memory_traces GROUP BY stream")[1]}
    p.shard.forget(AGENT, "gone", reason="test")
    p.settle()
    yield p, before
    p.close()


def policy(p, cls):
    return next(x for x in p.policies if isinstance(x, cls))


def test_the_discussion_had_observations_and_traces_before(forgotten):
    _, before = forgotten
    assert before.get("gone", 0) > 0 and before.get("kept", 0) > 0


def test_the_policies_drop_what_came_from_the_forgotten_discussion(forgotten):
    p, _ = forgotten
    assert not [k for k in policy(p, Observer).buffers if k[2] == "gone"]
    assert not [k for k in policy(p, Reflector).log.logs if k[2] == "gone"]
    for cls in (Reflector, Consolidator):
        streams = {t.stream for t in policy(p, cls).folds[AGENT].book.traces.values()}
        assert "gone" not in streams and "kept" in streams


def test_the_projections_keep_only_the_other_discussion(forgotten):
    p, _ = forgotten
    public = p.root / "projections" / "agents" / AGENT / "Public"
    assert (public / "kept_observations.md").exists() and not (public / "gone_observations.md").exists()
    assert p.sql("SELECT DISTINCT scope_id FROM observation_notes")[1] == [("kept",)]
    assert {s for (s,) in p.sql("SELECT DISTINCT stream FROM memory_traces")[1]} == {"kept"}
    assert p.shard.verify_replay() == []

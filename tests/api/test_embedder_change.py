"""A change of embedder never mixes vectors: status says what must be re-embedded, `reindex` re-embeds and switches.

The home is built with MiniLM (the default), then engram.json names an embedding endpoint: a real llama.cpp server
(llama-cpp-python, `--embedding`, the tiny 64-dimension model the test writes). Until `reindex`, the home serves
with MiniLM; after it, every vector the home uses (trace indexes, discussion stores) is the endpoint's, and replay
reproduces the projections.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from engram.api import types as t
from tests.providers.endpoints.llama_server import LlamaServer

AGENT = "ada"
DISCUSSION = "lisbon-trip"
MESSAGES = [
    "I'm planning a trip to Lisbon in May with my sister Ines.", "We want a hotel in Alfama near the river.",
    "Ines is vegetarian, so restaurants matter a lot.", "We land on the 3rd and fly back on the 10th.",
    "My favourite tram is the 28, it climbs to the castle.", "I also keep bees on the roof at home in Porto.",
    "Ines wants to see the tiles museum on the second day.", "We booked a fado dinner for the last night.",
]
SETTINGS = {"chunkEstimatedTokenSize": 40, "maxMessagesBetweenChunks": 4, "lookbackStartTurn": 0}
MINILM = "all-MiniLM-L6-v2-onnx-int8"


@pytest.fixture(scope="module")
def embed_server(tmp_path_factory):
    server = LlamaServer(tmp_path_factory.mktemp("llama-embed"), embedding=True, alias="tiny-embed").start()
    yield server
    server.stop()


def open_home(home):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    return Engram(InProcessRuntime(load_service_config(home)).start())


def write_config(home, embedder: dict | None, endpoint_url: str | None = None) -> None:
    config: dict = {"llm": {"endpoints": {"default": {"apiType": "offline"}}}}
    if endpoint_url:
        config["llm"]["endpoints"]["embed"] = {"apiType": "openAIEmbeddings", "baseUrl": endpoint_url,
                                               "model": "tiny-embed"}
    if embedder:
        config["embedder"] = embedder
    (home / "engram.json").write_text(json.dumps(config))


def index_models(home) -> set[str]:
    """The embedder named in every agent trace index's metadata."""
    return {json.loads(p.read_text())["model"] for p in (home / "projections").rglob("*.hnsw.json")}


def discussion_models(mem) -> set[str]:
    _, rows = mem.rt.sql("SELECT DISTINCT embedding_model FROM vector_memories")
    return {r[0] for r in rows}


def test_a_changed_embedder_is_listed_then_reindexed_and_recall_uses_only_the_new_vectors(
        tmp_path, monkeypatch, embed_server):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(SETTINGS))
    write_config(home, None)
    mem = open_home(home)
    try:
        mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[
            t.Message(role="user", content=text) for text in MESSAGES]))
        mem.wait_idle()
        status = mem.status()
        assert status.embedder.serving == "minilm" and not status.embedder.reindex_needed
        assert index_models(home) == {MINILM} and discussion_models(mem) == {MINILM}
        traces = mem.rt.sql("SELECT count(*) FROM memory_traces")[1][0][0]
        memories = mem.rt.sql("SELECT count(*) FROM vector_memories")[1][0][0]
        assert traces > 0 and memories > 0
    finally:
        mem.close()

    # engram.json now names the llama.cpp server: the home keeps serving with MiniLM and says what must be re-embedded.
    write_config(home, {"name": "endpoint", "endpoint": "embed"}, embed_server.url)
    mem = open_home(home)
    try:
        status = mem.status()
        assert status.embedder.serving == "minilm"
        assert status.embedder.configured == f"endpoint openAIEmbeddings tiny-embed {embed_server.url}"
        assert status.embedder.reindex_needed
        assert status.embedder.to_reembed == {AGENT: t.ReembedCounts(traces=traces, discussion_memories=memories)}
        before = mem.recall(AGENT, t.RecallRequest(query="Where do the bees live?", record=False))
        assert before.hits  # still served, with MiniLM's vectors
        found = mem.search(AGENT, DISCUSSION, t.SearchRequest(keywords="bees;Lisbon", mode="semantic"))
        assert found.hits and not any("fell back" in w for w in found.warnings)
        assert index_models(home) == {MINILM}

        job = mem.reindex()
        done = mem.jobs.wait(job.id, timeout=300)
        assert done.state == "succeeded", done.error
        name = f"openAIEmbeddings:tiny-embed@{embed_server.url}/64d"
        assert done.result["reindexed"] and done.result["name"] == name
        assert done.result["discussion_memories"] == memories
        # Progress counted the discussion memories, then the events folded into the new generation: the whole log.
        assert done.progress.unit == "events"
        assert done.progress.done == done.progress.total == done.result["events"] == mem.rt.heads()[0]

        status = mem.status()
        assert not status.embedder.reindex_needed and status.embedder.to_reembed == {}
        assert status.embedder.serving == status.embedder.configured
        # Every vector the home uses is the endpoint's: the trace indexes, the discussion stores, the query embedder.
        assert index_models(home) == {name}
        assert discussion_models(mem) == {name}
        assert mem.config.embedder.name == "endpoint" and mem.query_embedder().dim == 64
        dims = {json.loads(p.read_text())["dim"] for p in (home / "projections").rglob("*.hnsw.json")}
        assert dims == {64}
        after = mem.recall(AGENT, t.RecallRequest(query="Where do the bees live?", record=False))
        assert after.hits
        # The policies that hold vectors (recall's trace reader among them) refolded the log with the new embedder.
        from engram.policies.cognitive_base import CognitivePolicy

        held = [p for host in mem.rt.policy_hosts.values() for p in host.policies if isinstance(p, CognitivePolicy)]
        assert held and all(m.dim == 64 for p in held for m in p.memories.values())
        assert any(p.memories for p in held)
        found = mem.search(AGENT, DISCUSSION, t.SearchRequest(keywords="bees;Lisbon", mode="semantic"))
        assert found.hits and not any("fell back" in w for w in found.warnings)  # the store's vectors are the new ones

        # Replay reproduces the projections (the discussions' new vectors are in the log; the traces' from the cache).
        verify = mem.jobs.wait(mem.replay(t.ReplayRequest(verify=True)).id, timeout=300)
        assert verify.state == "succeeded" and verify.result == {"identical": True, "differences": []}
    finally:
        mem.close()

    # The switch is recorded in the home: a restart serves with the endpoint, nothing left to re-embed.
    mem = open_home(home)
    try:
        status = mem.status()
        assert status.embedder.serving.startswith("endpoint ") and not status.embedder.reindex_needed
    finally:
        mem.close()


def test_reindex_with_nothing_changed_does_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    write_config(home, {"name": "hashing"})
    mem = open_home(home)
    try:
        done = mem.jobs.wait(mem.reindex().id, timeout=60)
        assert done.state == "succeeded" and done.result["reindexed"] is False
        assert done.result["embedder"] == "hashing"
    finally:
        mem.close()


@pytest.mark.ray
def test_on_ray_the_shards_build_their_new_generation_while_appends_go_on_and_the_home_switches(
        tmp_path, monkeypatch, ray_session):
    """The same change on Ray actors, to a deliberately slow embedder (`OllamaStandIn`, a STAND-IN for Ollama's
    `/api/embed`, taking `embed_seconds_per_text` per text): the home's embedder actor (the cache's only writer)
    prepares the new embedder beside its own; each shard actor builds its new generation through it while the
    shard serves; an append made meanwhile is acknowledged before the rebuild ends and is in the new generation;
    then the shard and embedder actors restart with the new embedder."""
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.ray_runtime import RayRuntime
    from tests.api.test_reindex_live import MODEL, SLOW_SECONDS_PER_TEXT, wait_for
    from tests.providers.endpoints.standins import OllamaStandIn

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    write_config(home, {"name": "hashing"})
    mem = Engram(RayRuntime(load_service_config(home)).start())
    try:
        mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[
            t.Message(role="user", content=text) for text in MESSAGES[:4]]))
        assert mem.wait_idle(timeout=300)
    finally:
        mem.close()
    assert index_models(home) == {"hashing-v1-384"}

    slow = OllamaStandIn(models={MODEL: 2048}).start()
    config = {"llm": {"endpoints": {"default": {"apiType": "offline"}, "embed": {
        "apiType": "ollamaEmbeddings", "baseUrl": slow.url, "model": MODEL}}},
        "embedder": {"name": "endpoint", "endpoint": "embed"}}
    (home / "engram.json").write_text(json.dumps(config))
    mem = Engram(RayRuntime(load_service_config(home)).start())
    try:
        status = mem.status()
        assert status.embedder.serving == "hashing" and status.embedder.reindex_needed
        assert status.embedder.to_reembed[AGENT].traces > 0
        slow.embed_seconds_per_text = SLOW_SECONDS_PER_TEXT
        job = mem.reindex()
        wait_for(lambda: mem.jobs.get(job.id).progress.unit == "events", timeout=300)
        appended = mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[
            t.Message(role="user", content="Ines also wants to learn to make pasteis de nata.")]))
        during = mem.jobs.get(job.id)
        assert appended.results[0].appended == 1
        assert during.state == "running" and during.progress.done < during.progress.total

        done = mem.jobs.wait(job.id, timeout=600)
        assert done.state == "succeeded", done.error
        name = f"ollamaEmbeddings:{MODEL}@{slow.url}/3d"
        assert done.result["name"] == name
        assert not mem.status().embedder.reindex_needed
        slow.embed_seconds_per_text = 0.0
        assert mem.wait_idle(timeout=300)
        assert index_models(home) == {name}
        _, rows = mem.rt.sql("SELECT count(*) FROM memory_traces WHERE content LIKE '%pasteis de nata%'")
        assert rows[0][0] >= 1
        assert mem.recall(AGENT, t.RecallRequest(query="Where is the hotel?", record=False)).hits
        verify = mem.jobs.wait(mem.replay(t.ReplayRequest(verify=True)).id, timeout=600)
        assert verify.state == "succeeded" and verify.result == {"identical": True, "differences": []}
    finally:
        mem.close()
        slow.stop()

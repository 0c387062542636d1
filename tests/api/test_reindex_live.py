"""`engram reindex` while the home goes on serving: appends are acknowledged while the new generation of the projections
is built, and are in it after the switch; a reindex that fails or crashes before its switch leaves the old generation
serving.

The new embedder is an Ollama embeddings endpoint played by `OllamaStandIn` (a STAND-IN for Ollama's `/api/embed`,
strict about its wire format, tests/providers/endpoints/standins.py), made deliberately slow: each request takes
`embed_seconds_per_text` per text, as a big model on a small machine does, so the rebuild lasts long enough to append
during it. The home is on the in-process runtime (no Ray, no server).
"""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest

from engram.api import types as t
from engram.api.clock import now_us, to_us
from tests.providers.endpoints.standins import OllamaStandIn

AGENT = "ada"
DISCUSSION = "lisbon-trip"
MESSAGES = [
    "I'm planning a trip to Lisbon in May with my sister Ines.", "We want a hotel in Alfama near the river.",
    "Ines is vegetarian, so restaurants matter a lot.", "We land on the 3rd and fly back on the 10th.",
    "My favourite tram is the 28, it climbs to the castle.", "I also keep bees on the roof at home in Porto.",
    "Ines wants to see the tiles museum on the second day.", "We booked a fado dinner for the last night.",
]
SETTINGS = {"chunkEstimatedTokenSize": 40, "maxMessagesBetweenChunks": 4, "lookbackStartTurn": 0}
MODEL = "slow-embed"
HASHING = "hashing-v1-384"
# Per text of a request: the rebuild's replay embeds every trace text of the log (a few dozen here) in requests of
# 16, so each of them lasts seconds, far longer than an append takes.
SLOW_SECONDS_PER_TEXT = 0.15


@pytest.fixture()
def slow_ollama():
    server = OllamaStandIn(models={MODEL: 2048}).start()
    yield server
    server.stop()


def open_home(home):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    return Engram(InProcessRuntime(load_service_config(home)).start())


def write_config(home, embedder: dict, url: str | None = None) -> None:
    config: dict = {"llm": {"endpoints": {"default": {"apiType": "offline"}}}, "embedder": embedder}
    if url:
        config["llm"]["endpoints"]["embed"] = {"apiType": "ollamaEmbeddings", "baseUrl": url, "model": MODEL}
    (home / "engram.json").write_text(json.dumps(config))


def index_models(home) -> set[str]:
    return {json.loads(p.read_text())["model"] for p in (home / "projections").rglob("*.hnsw.json")}


def built_home(tmp_path, monkeypatch, url: str):
    """A home made with the hashing embedder, whose engram.json now names the slow Ollama endpoint."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(SETTINGS))
    write_config(home, {"name": "hashing"})
    mem = open_home(home)
    try:
        mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[
            t.Message(role="user", content=text) for text in MESSAGES]))
        assert mem.wait_idle(timeout=120)
        assert mem.rt.sql("SELECT count(*) FROM vector_memories")[1][0][0] > 0
    finally:
        mem.close()
    assert index_models(home) == {HASHING}
    write_config(home, {"name": "endpoint", "endpoint": "embed"}, url)
    return home


def wait_for(condition, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError("timed out")


def generation_dirs(home) -> list[str]:
    return [p.name for p in home.iterdir() if ".generation-" in p.name]


def test_an_append_during_the_rebuild_is_acknowledged_at_once_and_is_in_the_new_generation(
        tmp_path, monkeypatch, slow_ollama):
    home = built_home(tmp_path, monkeypatch, slow_ollama.url)
    name = f"ollamaEmbeddings:{MODEL}@{slow_ollama.url}/3d"
    mem = open_home(home)
    try:
        slow_ollama.embed_seconds_per_text = SLOW_SECONDS_PER_TEXT
        job = mem.reindex()
        # The rebuild has begun: the job counts events folded into the new generation (the first step is under way).
        wait_for(lambda: mem.jobs.get(job.id).progress.unit == "events")

        started = time.monotonic()
        appended = mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[
            t.Message(role="user", content="Ines also wants to learn to make pasteis de nata.")]))
        acknowledged_s = time.monotonic() - started
        during = mem.jobs.get(job.id)
        acknowledged_at = now_us()

        # Acknowledged while the rebuild still ran (on a loaded machine its steps may all be folded by then: the
        # job is still running its last rounds; that appends were never held for it is checked below, in time).
        assert appended.results[0].appended == 1
        assert during.state == "running" and during.progress.unit == "events", (acknowledged_s, during)

        done = mem.jobs.wait(job.id, timeout=120)
        assert done.state == "succeeded", done.error
        print(json.dumps({"acknowledged_s": round(acknowledged_s, 3), **done.result}))
        # Acknowledged before appends were held at all: before the switch's short held step began.
        held_from = to_us(datetime.fromisoformat(done.finished), max_ahead_s=None) - done.result["held_seconds"] * 1e6
        assert acknowledged_at < held_from, (acknowledged_s, done.result)
        # Every event of the log is in the new generation, the appended message's too.
        assert done.result["rounds"] >= 1 and done.result["events"] == mem.rt.heads()[0], done.result

        # After the switch: the new generation serves, the appended message's trace in it, every vector the new one's.
        assert not mem.status().embedder.reindex_needed
        assert index_models(home) == {name}
        _, rows = mem.rt.sql("SELECT count(*) FROM memory_traces WHERE content LIKE '%pasteis de nata%'")
        assert rows[0][0] >= 1
        _, rows = mem.rt.sql("SELECT DISTINCT embedding_model FROM vector_memories")
        assert {r[0] for r in rows} == {name}
        assert generation_dirs(home) == []
        slow_ollama.embed_seconds_per_text = 0.0
        assert mem.recall(AGENT, t.RecallRequest(query="pastries", record=False)).hits
        verify = mem.jobs.wait(mem.replay(t.ReplayRequest(verify=True)).id, timeout=120)
        assert verify.state == "succeeded" and verify.result == {"identical": True, "differences": []}
    finally:
        slow_ollama.embed_seconds_per_text = 0.0
        mem.close()


def test_a_reindex_whose_embedder_fails_mid_rebuild_leaves_the_old_generation_serving(
        tmp_path, monkeypatch, slow_ollama):
    home = built_home(tmp_path, monkeypatch, slow_ollama.url)
    mem = open_home(home)
    try:
        traces_before = mem.rt.sql("SELECT count(*) FROM memory_traces")[1][0][0]
        slow_ollama.embed_seconds_per_text = SLOW_SECONDS_PER_TEXT
        job = mem.reindex()
        wait_for(lambda: mem.jobs.get(job.id).progress.unit == "events")
        slow_ollama.embed_down = True  # the endpoint dies under the rebuild

        done = mem.jobs.wait(job.id, timeout=120)
        assert done.state == "failed"
        assert "llama runner process has terminated" in done.error.message

        # The old generation serves on: the hashing vectors, nothing re-embedded, appends and recall as before.
        status = mem.status()
        assert status.embedder.serving == "hashing" and status.embedder.reindex_needed
        assert index_models(home) == {HASHING}
        assert generation_dirs(home) == []
        mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[
            t.Message(role="user", content="The castle opens at nine.")]))
        assert mem.rt.sql("SELECT count(*) FROM memory_traces")[1][0][0] > traces_before
        assert mem.recall(AGENT, t.RecallRequest(query="Where do the bees live?", record=False)).hits
        assert index_models(home) == {HASHING}
    finally:
        slow_ollama.embed_down = False
        slow_ollama.embed_seconds_per_text = 0.0
        mem.close()

    # The endpoint is back: the next reindex switches.
    mem = open_home(home)
    try:
        done = mem.jobs.wait(mem.reindex().id, timeout=120)
        assert done.state == "succeeded", done.error
        assert index_models(home) == {f"ollamaEmbeddings:{MODEL}@{slow_ollama.url}/3d"}
    finally:
        mem.close()


@pytest.mark.parametrize("made_ready", [False, True], ids=["mid-rebuild", "ready-before-the-switch"])
def test_a_crash_before_the_switch_leaves_the_old_generation_serving_at_the_next_start(
        tmp_path, monkeypatch, slow_ollama, made_ready):
    """The process ends (as a crash would) with a new generation on disk, unfinished or finished but not switched
    to: the next start discards it and serves the old one."""
    from engram.config.serving_embedder import embedder_key

    home = built_home(tmp_path, monkeypatch, slow_ollama.url)
    mem = open_home(home)
    try:
        rt = mem.rt
        rt.prepare_vectors(rt.configured_embedder, [])
        rt.open_generations([0])
        host = rt.shard_host(0)
        host.advance_generation(5, host.head())  # part of the log folded into the new generation
        if made_ready:
            host.finish_generation(embedder_key(rt.configured_embedder))
        assert generation_dirs(home) == [".projections.generation-000"]
    finally:
        mem.close()  # the switch never came

    mem = open_home(home)
    try:
        assert generation_dirs(home) == []
        recovered = mem.rt.shard_host(0).recovered
        assert len(recovered) == 1 and "new generation of the projections" in recovered[0]
        assert "the old generation serves" in recovered[0]
        status = mem.status()
        assert status.embedder.serving == "hashing" and status.embedder.reindex_needed
        assert index_models(home) == {HASHING}
        assert mem.recall(AGENT, t.RecallRequest(query="Where do the bees live?", record=False)).hits
        verify = mem.jobs.wait(mem.replay(t.ReplayRequest(verify=True)).id, timeout=120)
        assert verify.state == "succeeded" and verify.result == {"identical": True, "differences": []}
    finally:
        mem.close()

"""The three files are projections of the log: replayed byte for byte, restored after deletion,
gone when the discussion is forgotten; ids never become paths unchecked."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from tests.memory.discussion.conftest import AGENT, T0, ingest, messages
from tests.memory.discussion.engine import LocalEngine, LocalMemory

from engram.events.control import DiscussionForgotten
from engram.events.envelope import NewEvent, Write
from engram.kernel.ids import InvalidIdError
from engram.memory.discussion.files import MEMORIES_SUFFIX, SUFFIXES, SUMMARY_SUFFIX, VECTOR_SUFFIX, locate_agent
from engram.memory.discussion.vectors import build_hnsw
from engram.projections.compare import differences
from engram.projections.discussion_rebuild import rebuild_discussion


@pytest.fixture
def remembered(engine):
    ingest(engine, "kept", messages(30, tokens=30))
    LocalMemory(engine, AGENT).request_summary("kept", "chatSummarySummarizer", min_memories_per_summary=3,
                                               loop_if_memories_exceed=3)
    return engine


def files(engine, discussion="kept") -> dict[str, Path]:
    return {s: engine.paths.discussion_file(AGENT, discussion, s) for s in SUFFIXES}


def test_the_three_files_have_the_guides_names_under_public(remembered):
    public = remembered.paths.root / "agents" / AGENT / "Public"
    assert sorted(p.name for p in public.iterdir()) == ["kept_memories.jsonl", "kept_summary.jsonl", "kept_vector_memory.db"]


def test_a_full_replay_rebuilds_the_files_byte_for_byte_and_the_hnsw_index_too(remembered, tmp_path):
    out = tmp_path / "replayed"
    remembered.shard.replay_into(out)
    assert differences(remembered.paths.root, out, [Path("agents")]) == []
    live = files(remembered)
    replayed = {s: out / p.relative_to(remembered.paths.root) for s, p in live.items()}
    for suffix in (MEMORIES_SUFFIX, SUMMARY_SUFFIX):
        assert live[suffix].read_bytes() == replayed[suffix].read_bytes()
    blobs = []
    for p in (live[VECTOR_SUFFIX], replayed[VECTOR_SUFFIX]):
        con = duckdb.connect(str(p), read_only=True)
        blobs.append(con.execute("SELECT index_bytes FROM hnsw_index").fetchone()[0])
        con.close()
    assert blobs[0] == blobs[1] and len(blobs[0]) > 1000
    store = LocalMemory(remembered, AGENT).open_store("kept")
    assert build_hnsw(store.rows)[1] == blobs[0]  # single-threaded, in order, fixed seed


def test_deleted_files_come_back_from_the_log_without_an_llm(remembered, monkeypatch):
    live = files(remembered)
    saved = {s: p.read_bytes() for s, p in live.items()}
    for p in live.values():
        p.unlink()
    # No LLM and no embedder may be called to rebuild them.
    monkeypatch.setattr(remembered.summarizer, "_tasks", None)
    monkeypatch.setattr("engram.providers.llm.offline.provider.OfflineTasks.run", lambda *a: pytest.fail("LLM called"))
    records = remembered.shard.read(0, limit=None, stream="kept")
    reports = rebuild_discussion(records, remembered.paths, AGENT, "kept")
    assert [r.status for r in reports] == ["restored", "restored", "restored"]
    assert live[MEMORIES_SUFFIX].read_bytes() == saved[MEMORIES_SUFFIX]
    assert live[SUMMARY_SUFFIX].read_bytes() == saved[SUMMARY_SUFFIX]
    again = rebuild_discussion(records, remembered.paths, AGENT, "kept", dry_run=True)
    assert [r.status for r in again] == ["identical", "identical", "identical"]


def test_a_file_deleted_while_engram_was_down_is_rendered_again_at_start(remembered):
    live = files(remembered)
    saved = live[MEMORIES_SUFFIX].read_bytes()
    root = remembered.home.root
    remembered.close()
    live[MEMORIES_SUFFIX].unlink()
    with LocalEngine(root):  # opening the shard is enough: no new event is needed
        assert live[MEMORIES_SUFFIX].read_bytes() == saved


def test_a_forgotten_discussion_loses_its_files_and_rows(remembered):
    remembered.append([Write("kept", AGENT, (NewEvent(DiscussionForgotten(discussion_id="kept"), T0),))])
    remembered.settle()
    assert not any(p.exists() for p in files(remembered).values())
    assert remembered.shard.query("SELECT count(*) FROM discussion_memories")[1] == [(0,)]


def test_a_discussion_id_never_becomes_a_path_unchecked(remembered):
    for bad in ("../kept", "a/b", "..", ".hidden"):
        with pytest.raises(InvalidIdError):
            locate_agent(remembered.paths, bad)
        with pytest.raises(InvalidIdError):
            remembered.paths.discussion_file(AGENT, bad, MEMORIES_SUFFIX)


def test_engram_sql_sees_the_memories_of_every_discussion(remembered):
    ingest(remembered, "other", messages(9))
    names, rows = remembered.shard.query(
        "SELECT discussion_id, count(*) FROM discussion_memories GROUP BY discussion_id ORDER BY 1")
    assert rows == [("kept", 5), ("other", 1)]
    _, vec = remembered.shard.query("SELECT count(*), any_value(len(embedding)) FROM vector_memories")
    assert vec == [(6, 384)]


def _run_creator_node(engine):
    from engram.memory.discussion.workflow import RunContext, parse, run

    return run(parse([{"type": "QualityMemory"}], "w.json"), RunContext(discussion="kept", memory=LocalMemory(engine, AGENT)))


def _generations(engine) -> list[int]:
    return [r.event.generation for r in engine.shard.read(0, limit=None, stream="kept", types=["GenerationStarted"])]


def test_deleting_the_three_files_and_running_a_creator_node_regenerates_with_the_current_settings(remembered):
    from tests.memory.discussion.conftest import write_settings

    live = files(remembered)
    chunks_before = len(live[MEMORIES_SUFFIX].read_text().splitlines())
    for p in live.values():  # the guide: delete all three, change a setting, run a creator node
        p.unlink()
    write_settings(remembered.home.root, chunkEstimatedTokenSize=600, maxMessagesBetweenChunks=50)
    out = _run_creator_node(remembered)
    assert "generation 1 regenerated from the full history" in out.results[0].info
    assert _generations(remembered) == [1]  # a new generation, recorded in the log
    lines = [json.loads(line) for line in live[MEMORIES_SUFFIX].read_text().splitlines()]
    assert {line["generation"] for line in lines} == {1}
    assert 0 < len(lines) < chunks_before  # larger chunks, as the new setting says
    assert live[SUMMARY_SUFFIX].exists() and live[VECTOR_SUFFIX].exists()
    assert remembered.shard.verify_replay() == []
    assert "regenerated" not in _run_creator_node(remembered).results[0].info  # once


def test_a_creator_node_restores_a_file_deleted_alone_from_the_log(remembered):
    live = files(remembered)
    saved = live[MEMORIES_SUFFIX].read_bytes()
    live[MEMORIES_SUFFIX].unlink()
    out = _run_creator_node(remembered)
    assert out.results[0].info.startswith("restored from the log: kept_memories.jsonl")
    assert live[MEMORIES_SUFFIX].read_bytes() == saved
    assert _generations(remembered) == []


def test_three_files_deleted_while_engram_was_down_are_regenerated_by_the_next_creator_node(remembered):
    live = files(remembered)
    root = remembered.home.root
    remembered.close()
    for p in live.values():
        p.unlink()
    with LocalEngine(root) as engine:
        assert live[MEMORIES_SUFFIX].exists()  # the start renders the projection again...
        out = _run_creator_node(engine)  # ...and the creator node still regenerates, as the guide says
        assert "generation 1 regenerated" in out.results[0].info
        assert _generations(engine) == [1]


def test_a_public_folder_deleted_while_engram_was_down_is_replayed_not_regenerated(remembered):
    import shutil

    live = files(remembered)
    saved = live[MEMORIES_SUFFIX].read_bytes()
    root = remembered.home.root
    remembered.close()
    shutil.rmtree(live[MEMORIES_SUFFIX].parent)  # the whole Public/ folder: a projection to rebuild
    with LocalEngine(root) as engine:
        out = _run_creator_node(engine)
        assert "regenerated" not in out.results[0].info
        assert _generations(engine) == []
        assert live[MEMORIES_SUFFIX].read_bytes() == saved


def test_a_creator_node_with_every_file_on_disk_asks_the_log_nothing_and_one_with_a_file_gone_asks_once(remembered,
                                                                                                       monkeypatch):
    asked = []
    expected = remembered.runtime.expected_files
    monkeypatch.setattr(remembered.runtime, "expected_files", lambda *a: asked.append(a) or expected(*a))
    live = files(remembered)
    assert all(p.exists() for p in live.values())
    assert "restored" not in _run_creator_node(remembered).results[0].info
    assert asked == []  # nothing deleted, nothing missing: no query at the shard on a chat turn's path
    live[SUMMARY_SUFFIX].unlink()
    assert "restored from the log" in _run_creator_node(remembered).results[0].info
    assert len(asked) == 1 and live[SUMMARY_SUFFIX].exists()  # one question for both checks


def test_the_shard_says_which_files_exist_as_the_confined_query_does_for_that_agent_only(remembered):
    from engram.memory.discussion.memory_files import EXPECTED_SQL

    shard = remembered.shard
    for agent, discussion in ((AGENT, "kept"), (AGENT, "never-seen"), ("someone-else", "kept")):
        _, rows = shard.query(EXPECTED_SQL, [discussion, agent])
        assert shard.expected_files(agent, discussion) == tuple(bool(x) for x in rows[0])
    assert shard.expected_files(AGENT, "kept") == (True, True, True)
    assert shard.expected_files("someone-else", "kept") == (False, False, False)
    assert remembered.runtime.expected_files(AGENT, "kept") == (True, True, True)

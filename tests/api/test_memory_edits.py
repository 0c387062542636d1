"""One memory at a time: an edited trace is recalled in its new form and replays identically; a deleted one leaves
no byte of its text under the home."""

from __future__ import annotations

import json
from pathlib import Path


import pytest

from engram.api import types as t
from engram.api.errors import ApiError

AGENT = "ada"
DISCUSSION = "lisbon-trip"
MESSAGES = ["I'm planning a trip to Lisbon in May with my sister Ines.", "We want a hotel in Alfama near the river.",
            "Ines is vegetarian, so restaurants matter a lot.", "We land on the 3rd and fly back on the 10th."]
NEW_FORM = "Ines turned pescatarian in March: grilled sardines QX-4471 are fine for her."


def files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


@pytest.fixture
def mem(tmp_path, monkeypatch):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    engram = Engram(InProcessRuntime(load_service_config(tmp_path / "home")).start())
    try:
        engram.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[
            t.Message(role="user", content=text) for text in MESSAGES]))
        engram.wait_idle()
        yield engram
    finally:
        engram.close()


def _trace_about(mem, words: str) -> str:
    hits = mem.recall(AGENT, t.RecallRequest(query=words, record=False, sources=False)).hits
    assert hits, f"no trace recalled for {words!r}"
    return hits[0].trace_id


def test_an_edited_memory_is_recalled_in_its_new_form_and_replay_is_identical(mem):
    trace_id = _trace_about(mem, "Ines vegetarian restaurants")
    edited = mem.edit_memory(AGENT, "trace", trace_id, t.MemoryEdit(content=NEW_FORM, metadata={"source": "user-fix"}))
    assert edited.memory.content == NEW_FORM and edited.memory.metadata == {"source": "user-fix"}
    assert mem.memory(AGENT, "fact", trace_id).content == NEW_FORM

    hits = mem.recall(AGENT, t.RecallRequest(query="is grilled sardines fine for Ines?", record=False)).hits
    assert hits[0].trace_id == trace_id and hits[0].content == NEW_FORM
    assert all(h.content != MESSAGES[2] for h in hits if h.trace_id == trace_id)
    mem.wait_idle()
    job = mem.replay(t.ReplayRequest(verify=True))
    done = mem.jobs.wait(job.id, timeout=300)
    assert done.state == "succeeded", done.error
    assert done.result["differences"] == [], done.result


def test_a_deleted_memory_leaves_no_byte_of_its_text_under_the_home(mem):
    home = mem.home.root
    trace_id = _trace_about(mem, "Ines vegetarian restaurants")
    mem.edit_memory(AGENT, "trace", trace_id, t.MemoryEdit(content=NEW_FORM))
    mem.recall(AGENT, t.RecallRequest(query="grilled sardines for Ines"))  # recorded, reinforcing it
    mem.wait_idle()
    assert files_holding(home, b"QX-4471")  # the log, the traces table, snapshots

    job = mem.delete_memory(AGENT, "trace", trace_id, t.ForgetRequest(reason="wrong"))
    done = mem.jobs.wait(job.id, timeout=300)
    assert done.state == "succeeded", done.error
    assert done.result["events_erased"] >= 2  # its encoding and its edit
    mem.wait_idle()
    assert files_holding(home, b"QX-4471") == []
    assert files_holding(home, NEW_FORM.encode()) == []
    with pytest.raises(ApiError) as refused:
        mem.memory(AGENT, "trace", trace_id)
    assert refused.value.code == "not_found"
    hits = mem.recall(AGENT, t.RecallRequest(query="grilled sardines QX-4471", record=False)).hits
    assert trace_id not in [h.trace_id for h in hits]
    # The rest of the discussion's memory is intact, and replay agrees with what is live.
    assert _trace_about(mem, "hotel in Alfama")
    job = mem.replay(t.ReplayRequest(verify=True))
    assert mem.jobs.wait(job.id, timeout=300).result["differences"] == []


def test_a_deleted_fact_does_not_come_back_when_the_policies_refold_the_messages_it_came_from(mem):
    _, rows = mem.sql_rows("SELECT trace_id, content FROM memory_traces WHERE agent = ? AND category <> '' "
                           "ORDER BY trace_id", [AGENT])
    assert rows, "auto-ingest kept no fact"
    fact, text = rows[0]
    job = mem.delete_memory(AGENT, "fact", fact, t.ForgetRequest())
    done = mem.jobs.wait(job.id, timeout=300)
    assert done.state == "succeeded", done.error
    mem.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[t.Message(role="user", content="Thanks!")]))
    mem.wait_idle()  # every policy rebuilt from the erased log has read the messages again
    _, after = mem.sql_rows("SELECT trace_id FROM memory_traces WHERE agent = ? AND content = ?", [AGENT, text])
    assert after == []
    if text not in MESSAGES:  # a fact in its own words (not a message's) is nowhere under the home
        assert files_holding(mem.home.root, text.encode()) == []


def test_recall_filters_by_metadata_kind_and_time_inside_the_search(mem):
    hotel = _trace_about(mem, "hotel in Alfama near the river")
    mem.edit_memory(AGENT, "trace", hotel, t.MemoryEdit(metadata={"topic": "lodging"}))
    ask = dict(query="Ines vegetarian restaurants", record=False, sources=False)
    everything = mem.recall(AGENT, t.RecallRequest(**ask)).hits
    assert everything[0].trace_id != hotel  # unfiltered, the restaurant memory ranks first
    tagged = mem.recall(AGENT, t.RecallRequest(**ask, metadata={"topic": "lodging"})).hits
    assert [h.trace_id for h in tagged] == [hotel]
    assert mem.recall(AGENT, t.RecallRequest(**ask, metadata={"topic": "food"})).hits == []
    kind = everything[0].trace_type
    assert {h.trace_type for h in mem.recall(AGENT, t.RecallRequest(**ask, kinds=[kind])).hits} == {kind}
    assert mem.recall(AGENT, t.RecallRequest(**ask, kinds=["no-such-kind"])).hits == []
    encoded = mem.memory(AGENT, "trace", hotel).created
    from datetime import datetime, timedelta

    at = datetime.fromisoformat(encoded.replace("Z", "+00:00"))
    assert mem.recall(AGENT, t.RecallRequest(**ask, until=at - timedelta(days=1))).hits == []
    assert mem.recall(AGENT, t.RecallRequest(**ask, since=at - timedelta(days=1))).hits
    with pytest.raises(ApiError) as refused:
        mem.recall(AGENT, t.RecallRequest(**ask, since=at, until=at))
    assert refused.value.code == "invalid_request"


def test_a_memory_of_another_kind_or_id_is_not_found(mem):
    with pytest.raises(ApiError) as refused:
        mem.memory(AGENT, "trace", "no-such-trace")
    assert refused.value.code == "not_found" and "no-such-trace" in refused.value.message
    with pytest.raises(ApiError) as refused:
        mem.edit_memory(AGENT, "trace", "no-such-trace", t.MemoryEdit(content="x y z"))
    assert refused.value.code == "not_found"


CHUNK_SETTINGS = {"chunkEstimatedTokenSize": 40, "maxMessagesBetweenChunks": 4, "lookbackStartTurn": 0,
                  "useVectorForQualityMemory": True}
TALK = [f"Day {i} of the Lisbon trip: we walk from Alfama to Belem and eat pasteis de nata number {i}."
        for i in range(12)]


@pytest.fixture
def chunked(tmp_path, monkeypatch):
    import json

    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"embedder": {"name": "hashing"}}))
    (home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(CHUNK_SETTINGS))
    engram = Engram(InProcessRuntime(load_service_config(home)).start())
    try:
        engram.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[
            t.Message(role="user" if i % 2 == 0 else "assistant", content=text) for i, text in enumerate(TALK)]))
        engram.wait_idle()
        yield engram
    finally:
        engram.close()


@pytest.mark.parametrize("kind", ["chunk", "vector"])
def test_an_edited_chunk_or_vector_memory_shows_its_new_form_and_a_deleted_one_leaves_no_byte(chunked, kind):
    mem = chunked
    home = mem.home.root
    table = "discussion_memories" if kind == "chunk" else "vector_memories"
    _, rows = mem.sql_rows(f"SELECT memory_id FROM {table} WHERE discussion_id = ? ORDER BY ordinal", [DISCUSSION])
    assert rows, rows
    memory_id = rows[0][0]
    assert mem.memory(AGENT, kind, memory_id).discussion == DISCUSSION

    edited = mem.edit_memory(AGENT, kind, memory_id, t.MemoryEdit(content=NEW_FORM, metadata={"checked": "yes"}))
    assert edited.memory.content == NEW_FORM and edited.memory.metadata == {"checked": "yes"}
    if kind == "chunk":
        lines = mem.memories(AGENT, DISCUSSION).memories
        assert (lines[0].summary, lines[0].metadata) == (NEW_FORM, {"checked": "yes"})
    else:
        found = mem.search(AGENT, DISCUSSION, t.SearchRequest(keywords="grilled sardines pescatarian", mode="keyword"))
        assert NEW_FORM in json.dumps(found.hits)
        ask = dict(keywords="Lisbon trip;Alfama;pasteis", mode="keyword", limit=10)
        labelled = mem.search(AGENT, DISCUSSION, t.SearchRequest(**ask, metadata={"checked": "yes"})).hits
        assert [h["memory_id"] for h in labelled] == [memory_id]
        assert mem.search(AGENT, DISCUSSION, t.SearchRequest(**ask, metadata={"checked": "no"})).hits == []
        from datetime import datetime, timedelta

        everything = mem.search(AGENT, DISCUSSION, t.SearchRequest(**ask)).hits
        said = min(datetime.fromisoformat(h["first_ts"].replace("Z", "+00:00")) for h in everything)
        assert mem.search(AGENT, DISCUSSION, t.SearchRequest(**ask, until=said)).hits == []
        assert mem.search(AGENT, DISCUSSION, t.SearchRequest(**ask, since=said - timedelta(days=1))).hits
    mem.wait_idle()
    job = mem.replay(t.ReplayRequest(verify=True))
    assert mem.jobs.wait(job.id, timeout=300).result["differences"] == []

    job = mem.delete_memory(AGENT, kind, memory_id, t.ForgetRequest())
    done = mem.jobs.wait(job.id, timeout=300)
    assert done.state == "succeeded", done.error
    mem.wait_idle()
    assert files_holding(home, b"QX-4471") == []
    _, left = mem.sql_rows(f"SELECT memory_id FROM {table} WHERE discussion_id = ?", [DISCUSSION])
    assert memory_id not in [r[0] for r in left] and len(left) == len(rows) - 1
    job = mem.replay(t.ReplayRequest(verify=True))
    assert mem.jobs.wait(job.id, timeout=300).result["differences"] == []


def _ask_for_the_summary(mem, name: str) -> None:
    """What a workflow's chatSummarySummarizer node does: ask the rolling summary to catch up (batches of 3)."""
    from engram.api.clock import now_us
    from engram.events.envelope import NewEvent, Write
    from engram.memory.discussion.memory_files import summary_request

    request = summary_request("chatSummarySummarizer", min_memories_per_summary=1, loop_if_memories_exceed=3)
    mem.rt.append([Write(DISCUSSION, AGENT, (NewEvent(request, now_us(), f"summary-request:{name}"),))])
    mem.wait_idle()


def test_the_rolling_summary_is_written_again_when_a_chunk_memory_it_absorbed_is_edited(chunked):
    mem = chunked
    home = mem.home.root
    chunks = mem.memories(AGENT, DISCUSSION).memories
    first, second = chunks[0], chunks[1]
    # A chunk memory edited before the summary absorbs it is merged in its edited form.
    mem.edit_memory(AGENT, "chunk", second.memory_id, t.MemoryEdit(content="Ines books the tram 28 tickets ZT-9902."))
    _ask_for_the_summary(mem, "first")
    summary = mem.summary(AGENT, DISCUSSION).summary
    assert summary.memories_absorbed == len(chunks) and summary.absorbed_through == chunks[-1].memory_id
    assert "ZT-9902" in summary.summary and second.summary not in summary.summary
    assert first.summary in summary.summary

    # One it absorbed already: the summary is written again over the chunk memories as they are now.
    edited = mem.edit_memory(AGENT, "chunk", first.memory_id, t.MemoryEdit(content=NEW_FORM))
    mem.wait_idle()
    again = mem.summary(AGENT, DISCUSSION).summary
    assert again.updated_seq > edited.seq
    assert NEW_FORM in again.summary and first.summary not in again.summary and "ZT-9902" in again.summary
    assert (again.memories_absorbed, again.absorbed_through) == (len(chunks), chunks[-1].memory_id)
    file = json.loads(Path(mem.summary(AGENT, DISCUSSION).path).read_text())
    assert file["summary"] == again.summary
    job = mem.replay(t.ReplayRequest(verify=True))
    assert mem.jobs.wait(job.id, timeout=300).result["differences"] == []

    # Deleting the edited chunk memory takes its words out of the summary that quoted them, too.
    job = mem.delete_memory(AGENT, "chunk", first.memory_id, t.ForgetRequest())
    assert mem.jobs.wait(job.id, timeout=300).state == "succeeded"
    mem.wait_idle()
    assert files_holding(home, b"QX-4471") == []


def test_a_vector_memorys_title_is_editable_and_its_vector_follows_the_new_form(chunked):
    mem = chunked
    _, rows = mem.sql_rows("SELECT memory_id, title, embedding FROM vector_memories WHERE discussion_id = ? "
                           "ORDER BY ordinal", [DISCUSSION])
    memory_id, old_title, old_vector = rows[0]
    title = "Azulejo workshop QX-4471 booking"
    edited = mem.edit_memory(AGENT, "vector", memory_id, t.MemoryEdit(title=title))
    assert edited.memory.title == title and mem.memory(AGENT, "vector", memory_id).title == title
    assert edited.memory.content == mem.memory(AGENT, "vector", memory_id).content  # the text stays
    _, (row,) = mem.sql_rows("SELECT title, embedding FROM vector_memories WHERE memory_id = ?", [memory_id])
    assert row[0] == title and row[1] != old_vector
    found = mem.search(AGENT, DISCUSSION, t.SearchRequest(keywords="azulejo workshop", mode="semantic", limit=1)).hits
    assert [h["memory_id"] for h in found] == [memory_id] and found[0]["title"] == title
    with pytest.raises(ApiError) as refused:
        chunk = mem.memories(AGENT, DISCUSSION).memories[0].memory_id
        mem.edit_memory(AGENT, "chunk", chunk, t.MemoryEdit(title=title))
    assert refused.value.code == "invalid_request" and "no title" in refused.value.message
    mem.wait_idle()
    job = mem.replay(t.ReplayRequest(verify=True))
    assert mem.jobs.wait(job.id, timeout=300).result["differences"] == []

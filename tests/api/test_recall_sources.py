"""Recall's source messages (`sources`): read from the log once, then kept in the server until the log's messages
change (a forget, a re-shard); erased text is never served from there."""

from __future__ import annotations

import pytest

from engram.api import types as t
from engram.api.cognitive import SourceCache

AGENT = "ada"
DISCUSSION = "lisbon-trip"
MESSAGES = ["I'm planning a trip to Lisbon in May with my sister Ines.", "We want a hotel in Alfama near the river.",
            "Ines is vegetarian, so restaurants matter a lot.", "We land on the 3rd and fly back on the 10th."]


@pytest.fixture
def mem(tmp_path, monkeypatch):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
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


def test_a_recalls_source_messages_are_read_from_the_log_once_and_a_forget_drops_them(mem, monkeypatch):
    reads = []
    read_seqs = mem.rt.read_seqs
    monkeypatch.setattr(mem.rt, "read_seqs", lambda agent, seqs: reads.append(list(seqs)) or read_seqs(agent, seqs))
    ask = t.RecallRequest(query="Where is the hotel?", discussion=DISCUSSION, record=False)
    first = mem.recall(AGENT, ask)
    sources = {s.seq: s.content for h in first.hits for s in h.sources}
    assert sources and set(sources.values()) <= set(MESSAGES) and len(reads) == 1
    again = mem.recall(AGENT, ask)
    assert [[s.content for s in h.sources] for h in again.hits] == [[s.content for s in h.sources] for h in first.hits]
    assert len(reads) == 1  # the same sources, without reading the log again
    job = mem.forget(AGENT, DISCUSSION, t.ForgetRequest(reason="test"))
    assert mem.jobs.wait(job.id, timeout=300).state == "succeeded"
    kept, missing = mem.source_cache().get(AGENT, sorted(sources))
    assert kept == {} and missing == sorted(sources)  # the server holds none of the erased messages


def test_a_source_read_that_began_before_a_forget_is_not_kept():
    cache = SourceCache()
    message = t.SourceMessage(seq=7, discussion=DISCUSSION, message_id="m7", role="user", name=None,
                              content=MESSAGES[0], ts="2026-05-01 10:00:00+00:00")
    mark = cache.mark()  # a recall starts reading the log ...
    with cache.changing():  # ... a forget erases the discussion meanwhile ...
        assert cache.mark() is None
        cache.put(AGENT, None, {7: message}, [7])  # (nothing read during the erasure is kept either)
    cache.put(AGENT, mark, {7: message}, [7])  # ... and what it read is not kept
    assert cache.get(AGENT, [7]) == ({}, [7])
    mark = cache.mark()
    cache.put(AGENT, mark, {7: message}, [7, 8])  # seq 8 is no message: known as such
    assert cache.get(AGENT, [7, 8]) == ({7: message}, [])


def test_after_a_forget_that_failed_part_way_nothing_is_kept():
    cache = SourceCache()
    message = t.SourceMessage(seq=1, discussion=DISCUSSION, message_id="m1", role="user", name=None,
                              content=MESSAGES[1], ts="2026-05-01 10:00:00+00:00")
    with pytest.raises(RuntimeError):
        with cache.changing():
            raise RuntimeError("the shard went away mid-forget")
    cache.put(AGENT, cache.mark(), {1: message}, [1])  # the shard completes that erasure later, out of sight
    assert cache.get(AGENT, [1]) == ({}, [1])

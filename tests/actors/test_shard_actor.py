"""The EventStore as a real Ray actor: appends, reads, SQL and errors cross the process boundary."""

import pytest
from tests.events.helpers import T0, write

from engram.api.types import AppendRequest, Message
from engram.events.envelope import from_us
from engram.events.store import ConcurrencyConflict

pytestmark = pytest.mark.ray


def test_append_and_read_through_the_shard_actor(engram_client):
    mem = engram_client
    res = mem.append([write("d1", range(4), agent="ada")])[0]
    assert res.seqs == (1, 2, 3, 4)
    recs = mem.read("ada", 2)
    assert [r.seq for r in recs] == [3, 4] and recs[0].event.content == "message number 2"
    assert mem.wait_projections()
    names, rows = mem.sql("SELECT discussion_id, agent, messages FROM discussions")
    assert rows == [("d1", "ada", 4)]
    status = mem.rt.shard_status()[0]
    assert status["head"] == 4 and status["projections"]["discussions"] == 4
    assert status["events_by_type"] == {"MessageAppended": 4}


def test_errors_keep_their_type_and_message_across_ray(engram_client):
    mem = engram_client
    mem.append([write("d1", range(2), agent="ada")])
    with pytest.raises(ConcurrencyConflict, match="expected version 0, but the stream is at version 2"):
        mem.append([write("d1", range(2, 3), agent="ada", expected=0)])


def test_messages_through_the_api_are_idempotent_and_record_settings(engram_client):
    mem = engram_client
    msgs = [Message(role="user", content=f"hello {i}", ts=from_us(T0 + i), message_id=f"u{i}") for i in range(3)]
    first = mem.append_messages("ada", "chat-1", AppendRequest(messages=msgs)).results[0]
    again = mem.append_messages("ada", "chat-1", AppendRequest(messages=msgs)).results[0]
    assert again.seqs == first.seqs and again.duplicates == 3 and again.appended == 0
    _, rows = mem.sql("SELECT scope FROM ev_settings_changed ORDER BY seq")
    assert rows == [("discussion",), ("agent",)]
    assert mem.wait_idle(timeout=30)


def test_agents_map_to_shards_by_a_stable_hash():
    from engram.kernel.sharding import shard_of

    assert [shard_of(a, 4) for a in ("ada", "bob", "cy", "dee")] == [shard_of(a, 4) for a in ("ada", "bob", "cy", "dee")]
    assert shard_of("ada", 4) == 3  # pinned: changing the hash would move every agent's data
    assert {shard_of(f"agent-{i}", 4) for i in range(100)} == {0, 1, 2, 3}

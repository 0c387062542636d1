"""Discussion ids per agent (issue 23, item 4): two agents may each have a discussion `my-trip`, with their own
messages, chunk memories, rolling summary, files and rows; a forgotten discussion's id is used again by its agent,
and the new discussion holds nothing of the old. (The API over the in-process runtime, offline memory tasks.)

The tests share one home and run in order: the second forgets what the first checked."""

from __future__ import annotations

import json

import pytest

from engram.api import types as t

ALICE, BOB, TRIP = "alice", "bob", "my-trip"
CHUNK_SETTINGS = {"chunkEstimatedTokenSize": 40, "maxMessagesBetweenChunks": 4, "lookbackStartTurn": 0,
                  "useVectorForQualityMemory": True}
LISBON = [f"Day {i} in Lisbon: we walk from Alfama to Belem and eat pasteis de nata number {i}." for i in range(10)]
KYOTO = [f"Day {i} in Kyoto: we cycle from Gion to Arashiyama and drink matcha cup number {i}." for i in range(10)]
PORTO = [f"Day {i} in Porto: we cross the Dom Luis bridge and taste port wine glass number {i}." for i in range(10)]


def talk(lines: list[str]) -> t.AppendRequest:
    return t.AppendRequest(messages=[t.Message(role="user" if i % 2 == 0 else "assistant", content=text)
                                     for i, text in enumerate(lines)])


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    root = tmp_path_factory.mktemp("namespaces") / "home"
    root.mkdir()
    (root / "engram.json").write_text(json.dumps({"embedder": {"name": "hashing"}, "llm": {"provider": "offline"}}))
    (root / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(CHUNK_SETTINGS))
    mem = Engram(InProcessRuntime(load_service_config(root), groups=["summarizer"]).start())
    try:
        mem.append_messages(ALICE, TRIP, talk(LISBON))
        mem.append_messages(BOB, TRIP, talk(KYOTO))  # refused with 409 before discussion ids were per agent
        mem.wait_idle()
        yield mem
    finally:
        mem.close()


def contents(mem, agent: str) -> list[str]:
    _, rows = mem.sql_rows("SELECT content FROM messages WHERE agent = ? AND discussion_id = ? ORDER BY seq",
                           [agent, TRIP])
    return [r[0] for r in rows]


def memory_text(mem, agent: str) -> str:
    return " ".join(m.summary for m in mem.memories(agent, TRIP).memories)


def files_text(mem, agent: str) -> str:
    from engram.config.home import ProjectionPaths

    folder = ProjectionPaths(mem.home.projections_dir).discussion_dir(agent)
    return " ".join(p.read_text() for p in sorted(folder.glob(f"{TRIP}_*.jsonl")))


def replay_differences(mem) -> list:
    mem.wait_idle()
    job = mem.replay(t.ReplayRequest(verify=True))
    return mem.jobs.wait(job.id, timeout=300).result["differences"]


def test_two_agents_each_have_their_own_my_trip_with_their_own_memories_summary_files_and_rows(home):
    mem = home
    assert contents(mem, ALICE) == LISBON and contents(mem, BOB) == KYOTO
    alice, bob = memory_text(mem, ALICE), memory_text(mem, BOB)
    assert "Lisbon" in alice and "Kyoto" not in alice
    assert "Kyoto" in bob and "Lisbon" not in bob
    assert "Lisbon" in files_text(mem, ALICE) and "Kyoto" not in files_text(mem, ALICE)
    assert "Kyoto" in files_text(mem, BOB) and "Lisbon" not in files_text(mem, BOB)
    _, rows = mem.sql_rows("SELECT agent, messages FROM discussions WHERE discussion_id = ? ORDER BY agent", [TRIP])
    assert rows == [(ALICE, len(LISBON)), (BOB, len(KYOTO))]
    found = mem.search(ALICE, TRIP, t.SearchRequest(keywords="Kyoto;Gion;matcha", mode="keyword", limit=10)).hits
    assert not any("Kyoto" in json.dumps(h) for h in found)
    assert [m.content for m in mem.list_messages(BOB, TRIP, limit=50).messages] == KYOTO
    assert replay_differences(mem) == []


def test_a_forgotten_discussion_id_is_used_again_by_its_agent_with_nothing_of_the_old_and_the_other_agents_stays(home):
    mem = home
    job = mem.forget(ALICE, TRIP, t.ForgetRequest(reason="test"))
    assert mem.jobs.wait(job.id, timeout=300).state == "succeeded"
    assert contents(mem, ALICE) == [] and memory_text(mem, ALICE) == ""
    # Bob's my-trip is another discussion: nothing of it went with alice's.
    assert contents(mem, BOB) == KYOTO and "Kyoto" in memory_text(mem, BOB) and "Kyoto" in files_text(mem, BOB)

    # The same first message again is a new message (the forgotten one's id went with it), then a new trip.
    again = mem.append_messages(ALICE, TRIP, t.AppendRequest(messages=[t.Message(role="user", content=LISBON[0])]))
    assert (again.results[0].appended, again.results[0].duplicates) == (1, 0)
    mem.append_messages(ALICE, TRIP, talk(PORTO))
    mem.wait_idle()
    assert contents(mem, ALICE) == [LISBON[0], *PORTO]
    alice = memory_text(mem, ALICE) + " " + files_text(mem, ALICE) + json.dumps(msgspec_builtins(mem.summary(ALICE, TRIP)))
    assert "Porto" in alice
    assert not any(f"nata number {i}" in alice for i in range(1, len(LISBON)))  # the forgotten trip's words
    _, rows = mem.sql_rows("SELECT agent, messages FROM discussions WHERE discussion_id = ? ORDER BY agent", [TRIP])
    assert rows == [(ALICE, 1 + len(PORTO)), (BOB, len(KYOTO))]
    # Nothing of the forgotten messages but the one said again is left anywhere under the home.
    gone = [line.encode() for line in LISBON[1:]]
    for path in mem.home.root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(g in data for g in gone), path
    assert replay_differences(mem) == []


def msgspec_builtins(value):
    import msgspec

    return msgspec.to_builtins(value)

"""Supervision on real Ray: policy actors killed mid-work restart, resume from snapshot + log, and create no memory
twice; concurrent producers get every message exactly once, in order per discussion."""

from __future__ import annotations

import threading

import pytest
from tests.server.test_rest import AGENT, sample_conversations

from engram.api import types as t

pytestmark = [pytest.mark.ray, pytest.mark.timeout(900)]

DUPLICATE_IDS = ("SELECT stream, event_id, count(*) FROM events WHERE event_id IS NOT NULL "
                 "GROUP BY stream, event_id HAVING count(*) > 1")
DUPLICATE_MEMORIES = ("SELECT payload->>'$.memory_id', count(*) FROM events WHERE type = 'ChunkSummarized' "
                      "GROUP BY 1 HAVING count(*) > 1")
DUPLICATE_TRACES = ("SELECT payload->>'$.trace_id', count(*) FROM events WHERE type = 'TraceEncoded' "
                    "GROUP BY 1 HAVING count(*) > 1")


# Small discussions: a chunk memory every 3 messages, none held back. WilmerAI's rule: the store is created at the
# check of message 3 in consolidation mode (tokens only), so the 4th message's check makes the first chunk.
SETTINGS = {"chunkEstimatedTokenSize": 80, "maxMessagesBetweenChunks": 3, "lookbackStartTurn": 0}


def open_home(tmp_path, settings: dict, agent_config: dict | None = None, agents=()):
    """An engram home on the session's Ray: `settings` as the discussions' memory settings file, and
    `agent_config` as the agent.config.json of each of `agents`."""
    import json

    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.ray_runtime import RayRuntime

    home = tmp_path / "home"
    home.mkdir()
    (home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(settings))
    for agent in agents:
        (home / "agents" / agent).mkdir(parents=True)
        (home / "agents" / agent / "agent.config.json").write_text(json.dumps(agent_config))
    return Engram(RayRuntime(load_service_config(home)).start())


@pytest.fixture
def ray_home(ray_session, tmp_path):
    mem = open_home(tmp_path, SETTINGS)
    yield mem
    mem.close()


def test_killed_policy_actors_restart_and_create_no_memory_twice_and_replay_equals_live(ray_home, ray_session):
    mem = ray_home
    rt = mem.rt
    rt.start_policies()
    mem.append_conversations(AGENT, t.AppendConversationsRequest(conversations=sample_conversations()))
    # Mid-work: the Summarizer host, the Observer and auto-ingest die while they handle the conversation.
    victims = {k: h for k, h in rt.policies().items() if k[0] in ("summarizer", "observer", "auto-ingest")}
    pids = ray_session.get([h.where.remote() for h in victims.values()])
    # (group members may share a process: each process killed once)
    for actor in {id(h.actor): h.actor for h in victims.values()}.values():
        ray_session.kill(actor, no_restart=False)
    assert mem.wait_idle(timeout=600)
    after = ray_session.get([h.where.remote() for h in victims.values()])
    assert all(a["pid"] != b["pid"] for a, b in zip(after, pids))  # each was restarted, in a new process
    _, rows = rt.sql("SELECT count(*) FROM events WHERE type IN ('ChunkSummarized', 'TraceEncoded', "
                     "'ObservationsRecorded')")
    assert rows[0][0] > 0  # memory was created after the restarts
    for query in (DUPLICATE_IDS, DUPLICATE_MEMORIES, DUPLICATE_TRACES):
        assert rt.sql(query)[1] == []
    assert rt.verify_replay(rt.all_shards()) == []


def test_groups_sharing_a_process_each_keep_their_own_loop_and_positions(ray_home, ray_session):
    """The default layout (`engram.policies.registry.PROCESSES`): the quiet groups share one process per shard, the
    turn's path (auto-ingest, the trace reader) has its own; a member paused in the shared process (as a forget pauses
    it) holds back only itself: the others there fold the new messages, and it catches up once resumed."""
    import time

    from engram.policies.registry import PROCESSES

    mem = ray_home
    rt = mem.rt
    rt.start_policies()
    handles = rt.policies()
    pids = dict(zip(handles, ray_session.get([h.where.remote() for h in handles.values()])))
    shared = {pids[k]["pid"] for k in handles if k[0] in PROCESSES[0]}
    alone = {g: pids[(g, 0, 0)]["pid"] for g in ("auto-ingest", "traces")}
    assert len(shared) == 1 and len(set(alone.values())) == 2 and not shared & set(alone.values())
    # `engram status` names the processes as Ray does: the shared one once, by the groups it hosts
    actors = set(rt.shard_status()[0]["actors"])
    assert actors == {"shard-000", "traces-000-000", "auto-ingest-000-000", "+".join(PROCESSES[0]) + "-000"}

    observer, neighbour = handles[("observer", 0, 0)], handles[("working-memory", 0, 0)]
    ray_session.get(observer.pause.remote(120))
    before = ray_session.get(observer.positions.remote())
    mem.append_conversations(AGENT, t.AppendConversationsRequest(conversations=sample_conversations()))
    head = ray_session.get(rt.shard(0).head.remote())
    deadline = time.monotonic() + 120
    while min(ray_session.get(neighbour.positions.remote()).values()) < head and time.monotonic() < deadline:
        time.sleep(0.2)
    assert min(ray_session.get(neighbour.positions.remote()).values()) >= head  # its neighbour went on
    assert ray_session.get(observer.positions.remote()) == before  # the paused member did not move
    ray_session.get(observer.resume.remote())
    assert mem.wait_idle(timeout=300)
    assert min(ray_session.get(observer.positions.remote()).values()) >= head


def test_a_read_during_a_shard_actor_restart_is_answered_after_it(ray_home, ray_session):
    mem = ray_home
    mem.append_conversations(AGENT, t.AppendConversationsRequest(conversations=sample_conversations()))
    before = [r.seq for r in mem.read(AGENT, limit=None)]
    ray_session.kill(mem.rt.shard(0), no_restart=False)
    assert [r.seq for r in mem.read(AGENT, limit=None)][:len(before)] == before


# The concurrency test asserts on discussion memories: three messages a discussion, and the store's first check (at
# message 3, consolidation mode: tokens only) closes a chunk of all three (each message is ~16 tokens). No vector
# memory store: three messages make no vector memory, and creating 1,000 empty `_vector_memory.db` files (one DuckDB
# file each) was most of the test's time.
CONCURRENT_SETTINGS = {"chunkEstimatedTokenSize": 40, "maxMessagesBetweenChunks": 3, "lookbackStartTurn": 0,
                       "useVectorForQualityMemory": False}
# Cognitive memory off for its agents (nothing there is asserted; embedding every message made the test take
# minutes): every policy actor still reads every message, and wait_idle still waits for all of them.
DISCUSSION_MEMORY_ONLY = {"memory": {"observer": {"enabled": False}, "reflector": {"enabled": False},
                                     "consolidation": {"enabled": False}, "encoding": {"encodeMessages": False}},
                          "storage": {"autoIngest": {"enabled": False}}}


@pytest.fixture
def concurrent_home(ray_session, tmp_path):
    mem = open_home(tmp_path, CONCURRENT_SETTINGS, DISCUSSION_MEMORY_ONLY, agents=[f"agent-{i}" for i in range(10)])
    yield mem
    mem.close()


def test_discussions_appended_concurrently_by_eight_producers_arrive_once_each_in_order(concurrent_home):
    mem = concurrent_home
    mem.rt.start_policies()  # as the server does at start (the Ray runtime starts no policy by itself)
    discussions, per_discussion, producers = 1000, 3, 8
    errors: list[BaseException] = []

    def produce(worker: int) -> None:
        try:
            for d in range(worker, discussions, producers):
                for i in range(per_discussion):  # one message per request, as a chat sends them
                    message = t.Message(role="user" if i % 2 == 0 else "assistant", message_id=f"d{d}-m{i}",
                                        content=f"Discussion {d}, message {i}: the parcel for order {d} ships on day {i}.")
                    mem.append_messages(f"agent-{d % 10}", f"disc-{d}", t.AppendRequest(messages=[message]))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(producers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    _, rows = mem.rt.sql("SELECT discussion_id, list(message_id ORDER BY seq) FROM messages GROUP BY discussion_id")
    seen = dict(rows)
    assert len(seen) == discussions
    assert all(seen[f"disc-{d}"] == [f"d{d}-m{i}" for i in range(per_discussion)] for d in range(discussions))
    assert mem.wait_idle(timeout=900)
    _, remembered = mem.rt.sql("SELECT DISTINCT stream FROM events WHERE type = 'ChunkSummarized'")
    assert {d for (d,) in remembered} == {f"disc-{d}" for d in range(discussions)}  # every discussion's memory
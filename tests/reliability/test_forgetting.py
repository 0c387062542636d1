"""After `forget` returns, no byte of a forgotten message is in any file under the home, and nothing writes it back."""

import logging
from pathlib import Path

import pytest
from tests.reliability.harness import LocalHome

from engram.memory.ingest.messages import IncomingMessage

SECRET = "ZEBRA-7731-QUARTZ"
T0 = 1_714_557_600_000_000  # 2024-05-01T10:00:00Z
MINUTE = 60_000_000

TRIP = [
    ("user", "I am planning a trip to Lisbon in May with my sister Carla."),
    ("assistant", "Lisbon in May is lovely. Do you want help with the itinerary?"),
    ("user", f"Yes. Also remember my locker code is {SECRET}, I always forget it at the gym."),
    ("assistant", "Noted. Shall we start with Sintra on the second day?"),
    ("user", "Sintra sounds great, and we love seafood restaurants near the river."),
    ("user", "Carla is allergic to peanuts, so keep that in mind for restaurants."),
]
WORK = [
    ("user", "The quarterly report for the Acme dashboard is due on Friday."),
    ("assistant", "I will draft the revenue section first."),
    ("user", "Priya wants the churn numbers split by region this time."),
]


def _messages(lines, start_us):
    return [IncomingMessage(role=r, content=c, ts_us=start_us + i * MINUTE, name="Ana" if r == "user" else None)
            for i, (r, c) in enumerate(lines)]


def files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


@pytest.fixture
def logged_home(tmp_path):
    """A home whose process logs (as a server would) into <home>/logs/engram.log."""
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    handler = logging.FileHandler(home / "logs" / "engram.log")
    handler.setLevel(logging.DEBUG)
    logger = logging.getLogger("engram")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield home
    logger.removeHandler(handler)
    logger.setLevel(old_level)
    handler.close()


def test_a_forgotten_discussion_leaves_no_byte_in_any_file_of_the_home(logged_home):
    with LocalHome(logged_home) as local:
        local.say("ana", "trip", _messages(TRIP, T0))
        local.say("ana", "work", _messages(WORK, T0 + 30 * MINUTE))
        local.settle()
        hits = local.recall("ana", f"what is my locker code {SECRET}?", now_us=T0 + 60 * MINUTE)
        assert any(SECRET in h.content for h in hits.hits)
        local.settle()
        assert files_holding(logged_home, SECRET.encode())  # it was everywhere: log, projections, snapshots

        report = local.forget("ana", "trip")

        assert report["events_erased"] > len(TRIP)
        assert report["policies_rebuilt"] == []  # every policy's own forget handling dropped it
        assert files_holding(logged_home, SECRET.encode()) == []
        assert files_holding(logged_home, b"allergic to peanuts") == []
        # The other discussion is intact, and replay agrees with what is live.
        assert local.shard.query("SELECT discussion_id FROM discussions")[1] == [("work",)]
        assert local.shard.verify_replay() == []
        # Nothing writes it back later: more conversation, more recalls, every policy running.
        local.say("ana", "work", _messages([("user", "Remind me what Priya asked for the report.")], T0 + 90 * MINUTE))
        local.settle()
        local.recall("ana", "locker code", now_us=T0 + 100 * MINUTE)
        local.settle()
    assert files_holding(logged_home, SECRET.encode()) == []
    assert files_holding(logged_home, b"Priya wants the churn numbers") != []


def test_a_forgotten_agent_leaves_no_byte_and_other_agents_keep_theirs(tmp_path):
    home = tmp_path / "home"
    with LocalHome(home) as local:
        local.say("ana", "trip", _messages(TRIP, T0))
        local.say("bo", "work", _messages(WORK, T0))
        local.settle()
        local.forget("ana")
        local.settle()
        assert local.shard.status()["unfinished_forgets"] == []
    assert files_holding(home, SECRET.encode()) == []
    assert files_holding(home, b"Sintra sounds great") == []
    assert files_holding(home, b"Priya wants the churn numbers") != []


def test_the_apis_forget_job_leaves_no_byte_in_any_file_of_the_home(logged_home):
    """The same through `engram.api` (what the server, the CLI and the clients call) over the in-process runtime:
    every policy group hosted, memory created as messages arrive, a recall naming the secret, then the job."""
    from datetime import datetime, timezone

    from engram.api import types as t
    from engram.api.service import Api
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    def say(api, discussion, lines, start_us):
        msgs = [t.Message(role=m.role, content=m.content, name=m.name,
                          ts=datetime.fromtimestamp(m.ts_us / 1e6, tz=timezone.utc)) for m in _messages(lines, start_us)]
        api.append_messages("ana", discussion, t.AppendRequest(messages=msgs))

    api = Api(InProcessRuntime(load_service_config(logged_home), wall_clock=False).start())
    try:
        say(api, "trip", TRIP, T0)
        say(api, "work", WORK, T0 + 30 * MINUTE)
        api.recall("ana", t.RecallRequest(query=f"what is my locker code {SECRET}?"))
        api.rt.wait_idle(timeout=120)
        assert files_holding(logged_home, SECRET.encode())

        job = api.jobs.wait(api.forget("ana", "trip", t.ForgetRequest(reason="asked to")).id, timeout=300)

        assert job.state == "succeeded", job.error
        assert job.result["forgotten"] == "trip" and job.result["events_erased"] > len(TRIP)
        assert files_holding(logged_home, SECRET.encode()) == []
        assert api.run_sql(t.SqlRequest(query="SELECT DISTINCT discussion_id FROM messages")).rows == [["work"]]
        api.recall("ana", t.RecallRequest(query="locker code"))
        api.rt.wait_idle(timeout=120)
    finally:
        api.close()
    assert files_holding(logged_home, SECRET.encode()) == []

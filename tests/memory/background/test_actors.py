"""The background processes as Ray actors: the demo conversation through the whole system (every policy
group, the MiniLM embedder), with the demo's lowered thresholds; the commands that show the result."""

from __future__ import annotations

import json

import pytest

from engram.cli.demo_background import DEMO_CONFIG
from engram.memory.ingest.formats import parse_file
from engram.memory.ingest.messages import discussion_write

pytestmark = pytest.mark.ray

AGENT = "demo-bg"
SAMPLE = "engram/samples/acme-dashboard.jsonl"


@pytest.fixture(scope="module")
def world(ray_session, tmp_path_factory):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.ray_runtime import RayRuntime

    home = tmp_path_factory.mktemp("background") / "home"
    (home / "agents" / AGENT).mkdir(parents=True)
    (home / "agents" / AGENT / "agent.config.json").write_text(json.dumps(DEMO_CONFIG))
    config = load_service_config(home)
    mem = Engram(RayRuntime(config).start())
    conv = parse_file(SAMPLE, now_us=0)[0]
    write = discussion_write(AGENT, conv.discussion, conv.messages, max_message_chars=100_000)
    mem.sync_settings(AGENT, ts_us=write.events[0].ts_us)
    mem.append([write])
    assert mem.wait_idle(timeout=300)
    yield mem, conv.discussion, home
    mem.close()


def counts(mem) -> dict[str, int]:
    return dict(mem.sql("SELECT type, count(*) FROM events WHERE agent = ? GROUP BY type", [AGENT])[1])


def test_the_actors_observe_reflect_and_consolidate_the_conversation(world):
    mem, discussion, home = world
    n = counts(mem)
    assert n["ObservationsRecorded"] >= 8 and n["ObservationsActivated"] >= 2 and n["Reflected"] >= 1
    # The sample spans nine days: one tick (and one report) per advance of its time, work only where due.
    assert 2 <= n["ClockTick"] == n["ConsolidationRan"] < 9 * 24
    reviews = mem.sql("SELECT count(*) FROM ev_trace_reinforced WHERE agent = ?", [AGENT])[1][0][0]
    assert reviews > 0 and n.get("TracePruned", 0) > 0
    status = mem.rt.shard_status()[0]
    assert {"observer", "clock", "reflector", "consolidator"} <= set(status["consumers"])
    assert status["projections"]["observations"] == status["head"]
    # What waiting for idle looks at (without the log and database queries of the full status): the same positions.
    progress = mem.rt.progress()[0]
    assert (progress["head"], progress["projections"], progress["consumers"]) == (
        status["head"], status["projections"], status["consumers"])
    log = home / "projections" / "agents" / AGENT / "Public" / f"{discussion}_observations.md"
    assert log.read_text().startswith(f"# Observation log: discussion {discussion} (agent {AGENT})")


def test_live_and_replayed_projections_are_identical(world):
    mem, _, _ = world
    assert mem.rt.verify_replay([0]) == []


def test_the_commands_show_observation_logs_and_consolidation_runs(world, capsys):
    from engram.cli.main import main

    from tests.server.helpers import Served

    mem, discussion, home = world
    with Served(mem):  # the commands are clients of the home's server
        run_commands(main, home, discussion, capsys)


def run_commands(main, home, discussion, capsys) -> None:
    assert main(["--home", str(home), "observations", "--agent", AGENT]) == 0
    out = capsys.readouterr().out
    assert discussion in out and "compression" in out
    assert main(["--home", str(home), "observations", "--agent", AGENT, "--discussion", discussion]) == 0
    assert "Date: 2026-03-" in capsys.readouterr().out
    assert main(["--home", str(home), "consolidations", "--agent", AGENT, "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "pruned" in out and "runs (" in out and "(3 rows)" in out

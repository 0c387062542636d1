"""The CLI as a user types it: ingest, then SQL in a new process; bad input fails cleanly."""

import json
import os
import subprocess
import sys

import pytest
from tests.cli.conftest import serve_inprocess
from tests.cli.helpers import SAMPLE, engram

pytestmark = pytest.mark.server


@pytest.fixture(autouse=True)
def _inprocess(home_dir):
    serve_inprocess(home_dir)


def test_ingest_then_sql_in_a_new_process_sees_what_was_ingested(home_dir, tmp_path):
    done = engram(home_dir, "ingest", str(SAMPLE), "--agent", "priya-bot")
    assert done.returncode == 0, done.stderr
    assert "45 new message(s), 0 already recorded, discussion(s): acme-dashboard" in done.stdout

    out = engram(home_dir, "sql", "SELECT count(*) AS n, min(ts) AS first FROM messages", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"n": 45, "first": "2026-03-02T09:15:00+00:00"}]

    csv = engram(home_dir, "sql", "SELECT discussion_id, agent, messages FROM discussions", "--csv")
    assert csv.stdout.splitlines() == ["discussion_id,agent,messages", "acme-dashboard,priya-bot,45"]

    status = engram(home_dir, "status", "--json")
    shard = json.loads(status.stdout)["shards"][0]
    assert shard["projection_lag"] == 0
    # 45 messages + 2 settings records; the Summarizer adds the discussion's memories (18 with the defaults).
    assert {k: shard["events_by_type"][k] for k in ("MessageAppended", "SettingsChanged")} == {"MessageAppended": 45, "SettingsChanged": 2}
    assert shard["head"] == sum(shard["events_by_type"].values())

    # The memories were made by the labelled offline heuristic: the cost view says so, and costs nothing.
    costs = json.loads(engram(home_dir, "costs", "priya-bot", "--json").stdout)
    assert costs and {(c["agent"], c["cost"], c["usd"]) for c in costs} == {("priya-bot", "offline", 0.0)}

    # Re-ingesting the same file appends nothing.
    again = engram(home_dir, "ingest", str(SAMPLE), "--agent", "priya-bot", "--no-wait")
    assert "0 new message(s), 45 already recorded" in again.stdout

    out = home_dir / "exports" / "replayed"  # jobs write under the home (or server.exportRoot) only
    rep = engram(home_dir, "replay", "--out", str(out), "--as-of", "2026-03-04T23:00:00Z")
    assert rep.returncode == 0, rep.stderr
    first_two_sessions = engram(home_dir, "sql", "SELECT count(*) FROM messages WHERE ts <= TIMESTAMPTZ '2026-03-04 23:00:00+00'", "--csv")
    assert first_two_sessions.stdout.splitlines()[1] == "25"
    import duckdb

    con = duckdb.connect(str(out / "shard-000.duckdb"), read_only=True)
    assert con.execute("SELECT messages FROM discussions").fetchall() == [(25,)]


def count_events(home_dir) -> int:
    res = engram(home_dir, "sql", "SELECT count(*) FROM events", "--csv")
    return int(res.stdout.splitlines()[1])


def test_invalid_agent_id_exits_2_and_appends_nothing(home_dir):
    res = engram(home_dir, "ingest", str(SAMPLE), "--agent", "../../etc")
    assert res.returncode == 2
    assert "agent id '../../etc' contains a path separator" in res.stderr
    assert count_events(home_dir) == 0


def test_invalid_discussion_tag_exits_2(home_dir, tmp_path):
    bad = tmp_path / "chat.json"
    bad.write_text(json.dumps([{"role": "user", "content": "[DiscussionId]a/../b[/DiscussionId] hi"}]))
    res = engram(home_dir, "ingest", str(bad))
    assert res.returncode == 2 and "contains a path separator" in res.stderr


def test_a_malformed_file_is_rejected_whole_with_line_and_reason(home_dir, tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"role": "user", "content": "fine"}\n{"role": "user", "content": "oops}\n')
    res = engram(home_dir, "ingest", str(SAMPLE), str(bad))
    assert res.returncode == 2
    assert f"{bad}:2:" in res.stderr and "nothing of" in res.stderr
    assert count_events(home_dir) == 0


def test_an_oversized_message_is_rejected_by_name(home_dir, tmp_path):
    serve_inprocess(home_dir, limits={"maxMessageChars": 50})
    big = tmp_path / "big.jsonl"
    big.write_text('{"role": "user", "content": "short"}\n' + json.dumps({"role": "user", "content": "x" * 80, "message_id": "huge"}) + "\n")
    res = engram(home_dir, "ingest", str(big), "--discussion", "d1")
    assert res.returncode == 2
    assert "message 2 (huge): 80 characters, over the limit of 50" in res.stderr
    assert count_events(home_dir) == 0


def test_a_typo_in_the_settings_file_stops_ingest_with_the_closest_key(home_dir):
    (home_dir / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text('{"lookbackStartTurns": 2}')
    res = engram(home_dir, "ingest", str(SAMPLE))
    assert res.returncode == 2
    assert "unknown key 'lookbackStartTurns'; did you mean 'lookbackStartTurn'?" in res.stderr
    assert count_events(home_dir) == 0


def test_output_cut_short_by_the_reader_is_no_error(home_dir):
    """`engram sql ... | head -1`: the reader closes the pipe; engram stops quietly (exit 141, as Unix tools)."""
    env = {**os.environ, "ENGRAM_HOME": str(home_dir)}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen([sys.executable, "-m", "engram", "sql", "SELECT range AS n FROM range(200000)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout.readline().split() == [b"n"]
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in err, err


def test_progress_into_a_pipe_is_plain_lines_and_on_a_terminal_one_redrawn_bar():
    import io

    from engram.cli.common import Progress

    piped = io.StringIO()
    p = Progress("memory", 10, stream=piped)
    for done in range(10):
        p.update(done)  # within five seconds: nothing
    p.finish()
    assert piped.getvalue() == "memory: 10/10\n"

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty = Terminal()
    p = Progress("memory", 10, stream=tty)
    p.update(5)
    p.finish()
    assert tty.getvalue() == "\rmemory [###############               ] 5/10\rmemory [##############################] 10/10\n"


def test_the_memory_progress_line_names_the_projections_or_policies_it_waits_for(capsys, monkeypatch):
    """`engram ingest` waits for memory with a line that moves with the consumer furthest behind and names it."""
    from engram.kernel.idle import wait_idle
    from engram.cli import common
    from engram.cli.ingest import wait_for_memory

    # Each look: (heads, positions) of one shard, as `status` reports them while an import is worked through.
    looks = iter([
        ([1453], [{"traces": 1453, "discussions": 1453, "auto-ingest": 2, "summarizer#0": 2, "summarizer#1": 2}]),
        ([1700], [{"traces": 1700, "discussions": 1700, "auto-ingest": 770, "summarizer#0": 1453, "summarizer#1": 900}]),
        ([4000], [{"traces": 4000, "discussions": 3990, "auto-ingest": 4000, "summarizer#0": 4000, "summarizer#1": 4000}]),
        ([4000], [{"traces": 4000, "discussions": 4000, "auto-ingest": 4000, "summarizer#0": 4000, "summarizer#1": 4000}]),
        ([4000], [{"traces": 4000, "discussions": 4000, "auto-ingest": 4000, "summarizer#0": 4000, "summarizer#1": 4000}]),
    ])

    class Memory:
        def wait_idle(self, on_progress):
            return wait_idle(lambda: next(looks), timeout=30, on_progress=on_progress, poll_s=0)

    monkeypatch.setattr(common.Progress, "update", lambda self, done, force=False: self.stream.write(
        f"{self.label}: {done}/{self.total}" + (f" ({self.note})" if self.note else "") + "\n"))
    wait_for_memory(Memory())
    lines = capsys.readouterr().err.splitlines()
    label = "memory (events every projection and policy has handled)"
    assert lines == [
        f"{label}: 2/1453 (waiting for auto-ingest, summarizer#0, summarizer#1)",
        f"{label}: 770/1700 (waiting for auto-ingest)",
        f"{label}: 3990/4000 (waiting for discussions)",
        f"{label}: 4000/4000",
        f"{label}: 4000/4000",
        f"{label}: 4000/4000",  # finished
    ]


def test_a_progress_line_that_loses_its_note_leaves_nothing_of_it_on_the_terminal():
    import io

    from engram.cli.common import Progress

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty = Terminal()
    p = Progress("memory", 10, stream=tty)
    p.note = "waiting for auto-ingest"
    p.update(5)
    p.note = ""
    p.finish()
    first, second = tty.getvalue().split("\r")[1:]
    assert first == "memory [###############               ] 5/10 (waiting for auto-ingest)"
    assert second.rstrip("\n").rstrip() == "memory [##############################] 10/10"
    assert len(second.rstrip("\n")) == len(first)  # padded over the old note

"""`engram observations` and `engram consolidations` as a user reads them: how far each observation log is from
the Observer's and the Reflector's thresholds (numbers from the agent's configuration and the log), and what a
consolidation run covers. A home served over HTTP on the in-process runtime (no Ray)."""

from __future__ import annotations

import json
import re

import pytest
from tests.memory.context.helpers import conversation
from tests.server.helpers import served_home

from engram.cli.main import main
from engram.memory.ingest.messages import discussion_write

pytestmark = pytest.mark.server

AGENT = "observed"
# Not the defaults (30,000 and 40,000): the line must say what this agent's configuration says.
OBSERVER, REFLECTOR = 1_300, 7_000


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("observations") / "home"
    cfg = home / "agents" / AGENT / "agent.config.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps({"memory": {"observer": {"activationTokens": OBSERVER, "bufferTokens": 200},
                                          "reflector": {"activationTokens": REFLECTOR}}}))
    with served_home(home) as mem:
        long, short = conversation(40), conversation(8)
        mem.sync_settings(AGENT, ts_us=long[0].ts_us)
        mem.append([discussion_write(AGENT, "long-chat", long, max_message_chars=100_000),
                    discussion_write(AGENT, "short-chat", short, max_message_chars=100_000),
                    # One message: the agent's time passes no consolidation boundary, so no run yet.
                    discussion_write("quiet", "hello", conversation(1), max_message_chars=100_000)])
        assert mem.wait_idle(timeout=300)
        yield home, mem


def observed_tokens(mem, discussion: str) -> int:
    return mem.sql("SELECT sum(token_estimate) FROM ev_message_appended WHERE stream = ? AND role IN "
                   "('user', 'assistant', 'tool')", [discussion])[1][0][0]


def test_observations_say_how_far_each_log_is_from_the_observer_and_the_reflector(home, capsys):
    home, mem = home
    assert main(["--home", str(home), "observations", "--agent", AGENT]) == 0
    out = capsys.readouterr().out
    lines = {m.group(1): m.group(0) for m in re.finditer(r"^discussion (\S+): .*$", out, re.M)}
    assert set(lines) == {"long-chat", "short-chat"}
    # Below the Observer's threshold nothing joined the log: every observed token of the chat is still unobserved.
    unobserved = observed_tokens(mem, "short-chat")
    assert 0 < unobserved < OBSERVER
    assert lines["short-chat"] == (
        f"discussion short-chat: {unobserved:,} of the Observer's {OBSERVER:,} tokens not yet observed "
        f"({OBSERVER - unobserved + 1:,} more to activate); active notes 0 of the Reflector's {REFLECTOR:,} tokens "
        f"({REFLECTOR + 1:,} more)")
    # Past it, the notes were activated: the line carries the log's active note tokens and what is left of each.
    assert observed_tokens(mem, "long-chat") > OBSERVER
    names, rows = mem.sql("SELECT unobserved_tokens, active_tokens FROM observation_logs WHERE scope_id = 'long-chat'")
    left, active = rows[0]
    assert active > 0 and left < OBSERVER
    assert lines["long-chat"] == (
        f"discussion long-chat: {left:,} of the Observer's {OBSERVER:,} tokens not yet observed "
        f"({OBSERVER - left + 1:,} more to activate); active notes {active:,} of the Reflector's {REFLECTOR:,} tokens "
        f"({REFLECTOR - active + 1:,} more)")
    # --json keeps every column, the thresholds included.
    assert main(["--home", str(home), "observations", "--agent", AGENT, "--json"]) == 0
    rows = {r["scope_id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["short-chat"]["observer_threshold"] == OBSERVER and rows["short-chat"]["reflector_threshold"] == REFLECTOR


def test_consolidations_say_a_run_covers_the_time_since_the_previous_one(home, capsys):
    home, _ = home
    with pytest.raises(SystemExit):
        main(["consolidations", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "covers all the time since the previous run" in help_text
    assert "Only boundaries with work are recorded" in help_text
    assert main(["--home", str(home), "consolidations", "--agent", "quiet"]) == 0
    assert capsys.readouterr().out == (
        "no consolidation runs for agent quiet yet: a run happens when the agent's time (event time) passes a "
        "memory.consolidation.intervalHours boundary, and covers all the time since the previous run; only "
        "boundaries with work are recorded\n")

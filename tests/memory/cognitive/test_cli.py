"""The commands as a user types them: ingest, recall --explain, traces, working-memory, mood."""

from __future__ import annotations

import pytest

from engram.cli.main import main

pytestmark = [pytest.mark.ray, pytest.mark.server]


def run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_recall_traces_working_memory_and_mood_from_the_command_line(ray_session, home_dir, capsys):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.ray_runtime import RayRuntime
    from tests.server.helpers import Served

    # The home's server, on the test session's Ray: the commands are its clients.
    with Engram(RayRuntime(load_service_config(home_dir)).start()) as mem, Served(mem):
        commands(str(home_dir), capsys)


def commands(home: str, capsys) -> None:
    code, _ = run(capsys, "--home", home, "ingest", "engram/samples/acme-dashboard.jsonl", "--agent", "demo")
    assert code == 0

    code, out = run(capsys, "--home", home, "recall", "what does Priya dislike?", "--agent", "demo",
                    "--discussion", "acme-dashboard", "--explain", "-k", "3", "--at", "2026-03-11T12:00:00Z")
    assert code == 0
    assert "factor       value   × weight = contribution" in out
    for factor in ("strength", "similarity", "recency", "emotional", "activation", "importance"):
        assert f"      {factor}" in out
    assert "source: seq" in out and "CSS-in-JS" in out
    assert out.count("\n 1. ") + out.count("\n 2. ") + out.count("\n 3. ") == 3
    assert "similarity: hybrid = 0.70 · embedding cosine + 0.30 · keyword (BM25) match" in out and "(cosine " in out
    assert "feedback: similarity = 0.50 · to the query + 0.50 · to the feedback query" in out and ", feedback " in out

    code, out = run(capsys, "--home", home, "recall", "what does Priya dislike?", "--agent", "demo", "--explain",
                    "--similarity", "embedding", "--at", "2026-03-11T12:00:00Z")
    assert code == 0 and "similarity: embedding cosine" in out and "keywords " not in out
    assert "feedback: similarity = 0.50 · to the query + 0.50 · to the feedback query" in out

    code, out = run(capsys, "--home", home, "recall", "x", "--agent", "demo", "--weight", "luck=1")
    assert code == 2

    code, out = run(capsys, "--home", home, "traces", "--agent", "demo")
    assert code == 0 and "trace_id" in out and "user_preference" in out

    code, out = run(capsys, "--home", home, "mood", "set", "--agent", "demo", "--valence", "0.5", "--arousal", "0.1",
                    "--dominance", "0")
    assert code == 0 and "valence +0.50" in out
    code, out = run(capsys, "--home", home, "mood", "show", "--agent", "demo")
    assert "0.5" in out and "set from the command line" in out
    assert main(["--home", home, "mood", "set", "--agent", "demo", "--valence", "2", "--arousal", "0", "--dominance", "0"]) == 2

    code, out = run(capsys, "--home", home, "working-memory", "--agent", "demo")
    assert code == 0 and "# Working Memory" in out and "## In Focus" in out and "[ACTIVE]" in out

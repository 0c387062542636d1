"""`engram status` and `engram reindex` as a user reads them after changing the embedder in engram.json (hashing to
MiniLM here: no server needed). A home served over HTTP on the in-process runtime (no Ray)."""

from __future__ import annotations

import json

import pytest

from engram.api import types as t
from engram.cli.main import main
from tests.server.helpers import served_home

pytestmark = pytest.mark.server

AGENT = "ada"


def test_status_says_what_must_be_re_embedded_and_reindex_switches(tmp_path, capsys):
    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"embedder": {"name": "hashing"}}))
    with served_home(home) as mem:
        mem.append_messages(AGENT, "bees", t.AppendRequest(messages=[
            t.Message(role="user", content="I keep bees on the roof in Porto."),
            t.Message(role="user", content="My sister Ines visits in May.")]))
        assert mem.wait_idle(timeout=120)
        traces = mem.rt.sql("SELECT count(*) FROM memory_traces")[1][0][0]
    assert traces > 0

    (home / "engram.json").write_text(json.dumps({"embedder": {"name": "minilm"}}))
    with served_home(home):
        assert main(["--home", str(home), "status"]) == 0
        out = capsys.readouterr().out
        assert "embedder  hashing" in out
        assert "REINDEX NEEDED: engram.json names the embedder minilm" in out
        assert f"  {AGENT}: {traces} trace(s), 0 discussion memory(ies)" in out

        assert main(["--home", str(home), "reindex"]) == 0
        out = capsys.readouterr().out
        assert "with all-MiniLM-L6-v2-onnx-int8" in out and "the home now serves with it (was: hashing)" in out

        assert main(["--home", str(home), "status"]) == 0
        out = capsys.readouterr().out
        assert "embedder  minilm" in out and "REINDEX NEEDED" not in out

        assert main(["--home", str(home), "reindex"]) == 0
        assert "nothing to re-embed" in capsys.readouterr().out

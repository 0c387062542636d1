"""`engram inspect --out`: the report file, and clean errors for bad input (no Ray: --no-recall reads the files)."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest

from engram.cli.main import main
from engram.inspect.api import request_key
from tests.inspect.synthetic import AGENT, DISCUSSION, small_home


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return small_home(tmp_path_factory.mktemp("cli-home"))


def data_of(html: str) -> dict:
    raw = re.search(r'<script id="engram-data" type="application/json">(.*?)</script>', html, re.S).group(1)
    return json.loads(raw)


def test_inspect_writes_one_self_contained_file_without_starting_anything(home, tmp_path, capsys):
    out = tmp_path / "report.html"
    old = os.umask(0o022)  # a user's shell: the report holds the agent's conversations, so it is made 0600 anyway
    try:
        assert main(["--home", str(home), "inspect", "--agent", AGENT, "--out", str(out), "--no-recall"]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert capsys.readouterr().out.startswith(f"wrote {out} (")
    html = out.read_text()
    assert "plotly.js v" in html and "<script src" not in html and "<link" not in html
    data = data_of(html)
    assert data["mode"] == "file" and data["discussion"] == DISCUSSION and data["queries"] == []
    answers = data["responses"]
    timeline = answers[request_key("timeline", {"agent": AGENT, "discussion": DISCUSSION})]
    assert {lane["key"]: lane["total"] for lane in timeline["lanes"]}["messages"] == 12
    # Every item of the timeline has its lineage in the file; every listed trace its curve.
    seqs = [i["seq"] for lane in timeline["lanes"] for i in lane["items"]]
    assert all(request_key("lineage", {"agent": AGENT, "seq": s}) in answers for s in seqs)
    listed = answers[request_key("traces", {"agent": AGENT})]["rows"]
    assert all(request_key("curve", {"agent": AGENT, "trace": r["trace_id"]}) in answers for r in listed)
    memories = answers[request_key("discussion", {"agent": AGENT, "discussion": DISCUSSION})]["memories"]
    for m in memories:
        page = answers[request_key("messages", {"agent": AGENT, "discussion": DISCUSSION, "first_seq": m["first_seq"],
                                                "last_seq": m["last_seq"]})]
        assert [r["message_id"] for r in page["rows"]] == m["message_ids"]


def test_data_in_the_file_cannot_end_its_script_element(home, tmp_path):
    from engram.inspect.page import _json_for_script

    text = _json_for_script({"x": "</script><script>alert(1)</script>"})
    assert "</script" not in text and json.loads(text) == {"x": "</script><script>alert(1)</script>"}


@pytest.mark.parametrize("args, message", [
    (["--agent", "nobody"], "agent 'nobody' has no events"),
    (["--agent", AGENT, "--discussion", "nope"], f"agent '{AGENT}' has no discussion 'nope'"),
    (["--agent", "../x"], "contains a path separator"),
    (["--agent", AGENT, "--query", " "], "--query is empty"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(home, tmp_path, capsys, args, message):
    out = tmp_path / "r.html"
    assert main(["--home", str(home), "inspect", *args, "--out", str(out), "--no-recall"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_a_home_with_no_log_is_refused(tmp_path, capsys):
    assert main(["--home", str(tmp_path / "empty"), "inspect", "--agent", AGENT, "--out", str(tmp_path / "r.html")]) == 2
    assert "has no event log" in capsys.readouterr().err


def test_served_inspector_answers_pages_views_and_errors(home):
    from engram.config.service import load_service_config
    from engram.inspect.adapter import HomeFilesReader
    from engram.inspect.web import respond

    reader = HomeFilesReader(load_service_config(home))
    try:
        agents = respond(reader, "/inspect", "", home=str(home))
        assert agents.status == 200 and f'href="/inspect?agent={AGENT}"' in agents.body.decode()
        page = respond(reader, "/inspect", f"agent={AGENT}", home=str(home))
        assert page.status == 200 and page.content_type.startswith("text/html")
        data = data_of(page.body.decode())
        assert data["mode"] == "served" and data["base"] == "/inspect/api" and data["discussion"] == DISCUSSION
        assert data["queries"] == ["message 11 about Lisbon"]  # the latest user message
        answer = respond(reader, "/inspect/api/traces", f"agent={AGENT}&limit=2", home=str(home))
        assert answer.status == 200 and len(json.loads(answer.body)["rows"]) == 2
        bad = respond(reader, "/inspect/api/traces", f"agent={AGENT}&limit=x", home=str(home))
        assert bad.status == 422 and json.loads(bad.body)["error"]["code"] == "invalid_request"
        assert "limit" in json.loads(bad.body)["error"]["message"]
        missing = respond(reader, "/inspect/api/lineage", f"agent={AGENT}&seq=99999", home=str(home))
        assert missing.status == 404 and json.loads(missing.body)["error"]["code"] == "not_found"
        unsafe = respond(reader, "/inspect", "agent=../x", home=str(home))
        assert unsafe.status == 400 and json.loads(unsafe.body)["error"]["code"] == "invalid_id"
        # The list of agents shows only those the asker may see.
        hidden = respond(reader, "/inspect", "", home=str(home), may=lambda agent: agent != AGENT)
        assert f"agent={AGENT}" not in hidden.body.decode()
    finally:
        reader.close()

"""A superseded fact answered as of before and after its change (issue 24), through the API, the MCP backend and SQL:
the user said where they live, later that they moved; recall says what is true now, what was true then, and when
the older fact stopped being true."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from engram.api import types as t

AGENT = "ada"
DISCUSSION = "home"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
MOVED = T0 + timedelta(hours=2)
SAID = [(T0, "I live in Lisbon, in a flat near the river."),
        (T0 + timedelta(minutes=1), "I work as a nurse at the city hospital."),
        (MOVED, "Actually, I no longer live in Lisbon: I moved to Porto last week."),
        (MOVED + timedelta(minutes=1), "The weather has been lovely lately.")]


@pytest.fixture
def mem(tmp_path, monkeypatch):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    engram = Engram(InProcessRuntime(load_service_config(tmp_path / "home")).start())
    try:
        engram.append_messages(AGENT, DISCUSSION, t.AppendRequest(messages=[
            t.Message(role="user", content=text, ts=ts) for ts, text in SAID]))
        engram.append_messages("bob", "bobs-home", t.AppendRequest(messages=[
            t.Message(role="user", content="I live in Oslo, my secret address is Storgata 5.", ts=T0)]))
        engram.wait_idle()
        yield engram
    finally:
        engram.close()


def _ask(mem, **options):
    return mem.recall(AGENT, t.RecallRequest(query="Where do I live?", discussion=DISCUSSION, record=False,
                                             at=MOVED + timedelta(hours=1), **options)).hits


def test_recall_answers_what_is_true_now_and_as_of_before_the_change_the_superseded_fact(mem):
    now = _ask(mem)
    assert "Porto" in now[0].content and not any("near the river" in h.content for h in now)
    before = _ask(mem, as_of=MOVED - timedelta(hours=1))
    assert "near the river" in before[0].content and not any("Porto" in h.content for h in before)
    old = before[0]
    assert datetime.fromisoformat(old.valid_to.replace("Z", "+00:00")) == MOVED  # when the conversation said the move
    assert datetime.fromisoformat(old.valid_from.replace("Z", "+00:00")) == T0
    assert old.superseded_by == now[0].trace_id and old.via == "superseded"
    after = _ask(mem, as_of=MOVED + timedelta(hours=1))
    assert "Porto" in after[0].content and not any("near the river" in h.content for h in after)


def test_the_mcp_recall_and_the_sql_view_answer_as_of_a_time(mem):
    from engram.mcp.backends import ApiBackend
    from engram.server.auth import LOOPBACK

    backend = ApiBackend(mem, LOOPBACK)
    before = backend.recall(AGENT, "Where do I live?", DISCUSSION, 3, (MOVED - timedelta(hours=1)).isoformat())
    assert "near the river" in before.hits[0].content and before.hits[0].superseded_by
    _, rows = mem.sql("SELECT content, valid_to, superseded_by, true_now FROM trace_validity WHERE agent = ? "
                      "AND valid_from <= ?::TIMESTAMPTZ AND (valid_to IS NULL OR valid_to > ?::TIMESTAMPTZ) ORDER BY valid_from",
                      [AGENT, MOVED - timedelta(hours=1), MOVED - timedelta(hours=1)])
    assert any("near the river" in r[0] and r[1] == MOVED and r[2] and r[3] is False for r in rows)
    assert not any("Porto" in r[0] for r in rows)


def test_a_key_scoped_to_one_agent_sees_only_its_own_facts_in_the_validity_view(mem):
    everyone = mem.run_sql(t.SqlRequest(query="SELECT DISTINCT agent FROM trace_validity ORDER BY agent"))
    assert everyone.rows == [["ada"], ["bob"]]
    scoped = mem.run_sql(t.SqlRequest(query="SELECT agent, content FROM trace_validity"), agents=["ada"])
    assert scoped.rows and {r[0] for r in scoped.rows} == {"ada"}
    assert not any("Oslo" in r[1] or "Storgata" in r[1] for r in scoped.rows)

"""engram's own SQL at a shard (`ShardHost.query`) runs in confined sessions kept open between queries: each query
still reads the shard as it is now, the session holds none of its rows afterwards, it stays as confined as a new one,
and a user's SQL never runs in one. A parameterised query loads only the relations it names."""

import time

import pytest
from tests.events.helpers import write

from engram.shard.host import ShardHost
from engram.sql import SqlFailed, SqlTimeout, run_readonly
from engram.sql import readonly


@pytest.fixture
def live(tmp_path):
    host = ShardHost(tmp_path / "log" / "shard-000.duckdb", tmp_path / "projections", background=False)
    host.append_many([write("trip", range(0, 5), agent="alice"), write("work", range(10, 13), agent="bob")])
    host.catch_up()
    yield host
    host.close()


def _messages(host, agent: str) -> int:
    return dict(host.query("SELECT discussion_id, messages FROM discussions WHERE agent = ?", [agent])[1])


def test_a_kept_session_reads_what_was_appended_after_its_last_query(live):
    assert _messages(live, "alice") == {"trip": 5}
    live.append_many([write("trip", range(5, 9), agent="alice"), write("paris", range(20, 22), agent="alice")])
    live.catch_up()
    assert _messages(live, "alice") == {"trip": 9, "paris": 2}
    assert live.query("SELECT count(*) FROM messages WHERE agent = $1", ["alice"])[1] == [(11,)]
    assert live.own_sessions.opened == 1  # one session served every query


def test_a_kept_session_holds_none_of_the_shards_rows_between_queries(live):
    live.query("SELECT count(*) FROM messages")
    (session,) = live.own_sessions._idle
    assert session.registered == []
    with pytest.raises(Exception, match="does not exist"):  # the view is kept, the data under it is not
        session.con.execute("SELECT count(*) FROM messages").fetchall()


def test_a_kept_session_is_as_confined_as_a_new_one(live):
    for sql in ["SELECT * FROM read_text('/etc/hostname')", "SELECT * FROM '/etc/passwd'"]:
        with pytest.raises(SqlFailed):
            live.query(sql)
    (session,) = live.own_sessions._idle
    with pytest.raises(Exception, match="configuration"):
        session.con.execute("SET enable_external_access = true")
    assert live.query("SELECT count(*) FROM events")[1] == [(8,)]  # and it serves on


def test_a_users_sql_never_runs_in_a_kept_session(live):
    live.query("SELECT count(*) FROM events")
    (session,) = live.own_sessions._idle
    assert live.sql("SELECT count(*) FROM events").rows == [(8,)]
    assert live.sql("SELECT count(*) FROM events", agents=["bob"]).rows == [(3,)]
    assert live.own_sessions._idle == [session] and live.own_sessions.opened == 1


def test_a_kept_query_stopped_at_its_timeout_closes_its_session(live):
    started = time.monotonic()
    with pytest.raises(SqlTimeout):
        run_readonly("SELECT count(*) FROM range(1000000000000) a, range(10) b", live._sql_source(), timeout_s=0.3,
                     sessions=live.own_sessions)
    assert time.monotonic() - started < 5
    assert live.own_sessions._idle == []  # never given to another query
    assert live.query("SELECT count(*) FROM events")[1] == [(8,)]
    assert live.own_sessions.opened == 2


def test_a_relation_whose_columns_change_has_its_views_made_again():
    import pyarrow as pa

    session = readonly.Session()
    try:
        session.register("_proj_000_t", pa.table({"agent": ["a"]}))
        session.make_view("t", "SELECT * FROM _proj_000_t")
        session.release()
        session.register("_proj_000_t", pa.table({"agent": ["a"]}))
        assert "t" in session.views  # same columns: the view stays
        session.release()
        session.register("_proj_000_t", pa.table({"agent": ["a", "b"], "n": [1, 2]}))
        assert session.views == {}
        session.make_view("t", "SELECT * FROM _proj_000_t")
        assert session.con.execute("SELECT sum(n) FROM t").fetchall() == [(3,)]
    finally:
        session.close()


def test_a_parameterised_query_loads_only_the_relations_it_names(live, monkeypatch):
    fetched = []
    fetch = readonly._fetch

    def spy(trusted, relation, *args, **kwargs):
        fetched.append(relation)
        return fetch(trusted, relation, *args, **kwargs)

    monkeypatch.setattr(readonly, "_fetch", spy)
    assert live.query("SELECT count(*) FROM discussions WHERE agent = ? AND discussion_id = $2", ["bob", "work"])[1] \
        == [(1,)]
    assert fetched == ["proj.discussions"]  # not the log, not the other tables
    fetched.clear()
    assert live.sql("SELECT content FROM messages WHERE agent = ? ORDER BY seq LIMIT 1", ["bob"]).rows \
        == [("message number 10",)]
    assert len(fetched) == 1 and fetched[0].endswith(".main.events")


def test_parameters_are_found_by_the_tokenizer_not_by_their_characters():
    sql = "SELECT '?', x->>'$.y', $1, $name, ?, ?2 FROM t WHERE z = ? -- ? too"
    assert readonly.without_parameters(sql) == "SELECT '?', x->>'$.y', NULL, NULL, NULL, NULL FROM t WHERE z = NULL -- ? too"


def test_a_query_alarm_cancelled_in_time_never_fires():
    fired = []
    alarms = readonly._Alarms()
    for _ in range(50):
        alarms.cancel(alarms.set(0.05, lambda: fired.append(1)))
    kept = alarms.set(0.05, lambda: fired.append(2))
    deadline = time.monotonic() + 5
    while not fired and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fired == [2]
    alarms.cancel(kept)

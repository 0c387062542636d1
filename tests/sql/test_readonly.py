"""User SQL is read-only and confined: every escape a user tried is refused, on the files and in the writer's process."""

import time
from pathlib import Path

import pytest
from tests.events.helpers import write

from engram.config.home import ProjectionPaths
from engram.shard.host import ShardHost
from engram.sql import HomeFiles, SqlFailed, SqlRefused, SqlTimeout, run_readonly


@pytest.fixture
def home(tmp_path) -> Path:
    """A home with two agents' discussions; no process holds its files afterwards."""
    host = ShardHost(tmp_path / "log" / "shard-000.duckdb", tmp_path / "projections", background=False)
    host.append_many([write("trip", range(0, 5), agent="alice"), write("work", range(10, 13), agent="bob")])
    host.catch_up()
    host.close()
    return tmp_path


def _files(home: Path) -> HomeFiles:
    return HomeFiles({0: home / "log" / "shard-000.duckdb"}, ProjectionPaths(home / "projections"))


def _count(home: Path) -> int:
    return run_readonly("SELECT count(*) FROM events", _files(home)).rows[0][0]


@pytest.fixture
def live(home):
    host = ShardHost(home / "log" / "shard-000.duckdb", home / "projections", background=False)
    yield host
    host.close()


def test_detaching_the_log_and_attaching_it_read_write_to_delete_is_refused(home):
    log = home / "log" / "shard-000.duckdb"
    for sql in [
        f"DETACH log_000; ATTACH '{log}' AS rw; DELETE FROM rw.events WHERE type='MessageAppended'",
        "DETACH log_000",
        f"ATTACH '{log}' AS rw",
        "DELETE FROM log_000.events WHERE type = 'MessageAppended'",
    ]:
        with pytest.raises(SqlRefused):
            run_readonly(sql, _files(home))
    assert _count(home) == 8


def test_a_select_cannot_write_through_a_table_function_either(home):
    with pytest.raises(SqlFailed, match="Expected a single SELECT statement"):
        run_readonly("SELECT * FROM query('DELETE FROM log_000.events RETURNING seq')", _files(home))
    assert _count(home) == 8


def test_copy_to_a_file_is_refused_and_writes_nothing(home, tmp_path):
    target = tmp_path / "x.csv"
    with pytest.raises(SqlRefused, match="COPY statements are not allowed"):
        run_readonly(f"COPY (SELECT * FROM messages) TO '{target}'", _files(home))
    assert not target.exists()


def test_reading_a_file_of_the_machine_is_refused(home):
    with pytest.raises(SqlFailed, match="Permission Error"):
        run_readonly("SELECT * FROM read_text('/etc/hostname')", _files(home))
    with pytest.raises(SqlFailed, match="does not exist") as refused:  # no file scans by name either
        run_readonly("SELECT * FROM '/etc/passwd'", _files(home))
    assert "root:" not in str(refused.value)


def test_a_query_naming_a_table_that_does_not_exist_is_told_the_tables_it_can_name(home):
    with pytest.raises(SqlFailed) as wrong:
        run_readonly("SELECT count(*) FROM traces", _files(home))
    said = str(wrong.value)
    assert "Table with name traces does not exist" in said
    tables = said.split("The tables and views: ", 1)[1].split(", ")
    assert {"memory_traces", "messages", "events", "discussions"} <= set(tables)
    assert not [n for n in tables if n.startswith("_")]  # the attached files' own names are not offered
    with pytest.raises(SqlFailed) as column:  # a wrong column is DuckDB's message alone
        run_readonly("SELECT no_such_column FROM messages", _files(home))
    assert "The tables and views" not in str(column.value)


def test_attaching_a_new_database_to_create_a_table_is_refused(home, tmp_path):
    target = tmp_path / "new.duckdb"
    with pytest.raises(SqlRefused):
        run_readonly(f"ATTACH '{target}' AS n; CREATE TABLE n.t AS SELECT 1", _files(home))
    with pytest.raises(SqlRefused, match="CREATE statements are not allowed"):
        run_readonly("CREATE TABLE t AS SELECT 1", _files(home))
    assert not target.exists()


def test_installing_or_loading_an_extension_is_refused(home):
    for sql in ["INSTALL httpfs", "LOAD httpfs", "SET enable_external_access = true", "PRAGMA enable_profiling"]:
        with pytest.raises(SqlRefused):
            run_readonly(sql, _files(home))


def test_an_empty_query_is_refused_with_a_clear_message(home):
    for sql in ["", "   ", " ; "]:
        with pytest.raises(SqlRefused, match="empty query"):
            run_readonly(sql, _files(home))


def test_in_the_writers_process_queries_never_touch_the_writers_connection(live):
    for sql in ['DELETE FROM "shard-000".main.events', "DROP TABLE proj.discussions", "DETACH proj",
                "UPDATE proj.discussions SET messages = 0"]:
        with pytest.raises(SqlRefused):
            live.sql(sql)
    with pytest.raises(SqlFailed, match="does not exist"):  # the writer's catalogs are not even visible
        live.sql('SELECT count(*) FROM "shard-000".main.events')
    with pytest.raises(SqlFailed):
        live.sql("SELECT * FROM query('DELETE FROM proj.discussions RETURNING 1')")
    assert live.sql("SELECT count(*) FROM events").rows == [(8,)]
    assert dict(live.sql("SELECT discussion_id, messages FROM discussions").rows) == {"trip": 5, "work": 3}


def test_live_and_file_queries_give_the_same_rows(home):
    sql = "SELECT discussion_id, role, content FROM messages ORDER BY seq"
    from_files = run_readonly(sql, _files(home)).rows
    host = ShardHost(home / "log" / "shard-000.duckdb", home / "projections", background=False)
    try:
        assert host.sql(sql).rows == from_files
    finally:
        host.close()
    assert len(from_files) == 8


SLOW = "SELECT count(*) FROM range(1000000000000) a, range(10) b"


def test_a_query_that_runs_too_long_is_stopped_at_its_timeout(home):
    started = time.monotonic()
    with pytest.raises(SqlTimeout, match="longer than 0.5 s"):
        run_readonly(SLOW, _files(home), timeout_s=0.5)
    assert time.monotonic() - started < 5


def test_a_query_that_runs_too_long_in_the_writers_process_is_stopped_at_its_timeout(live):
    started = time.monotonic()
    with pytest.raises(SqlTimeout, match="longer than 0.5 s"):
        live.sql(SLOW, timeout_s=0.5)
    assert time.monotonic() - started < 5
    assert live.sql("SELECT count(*) FROM messages").rows == [(8,)]  # the shard serves on


def test_at_most_max_rows_rows_come_back_and_the_result_says_so(home):
    result = run_readonly("SELECT * FROM range(100)", _files(home), max_rows=10)
    assert len(result.rows) == 10 and result.truncated
    result = run_readonly("SELECT * FROM range(10)", _files(home), max_rows=10)
    assert len(result.rows) == 10 and not result.truncated


def _sees_only_alice(run) -> None:
    assert run("SELECT DISTINCT agent FROM events").rows == [("alice",)]
    assert run("SELECT count(*) FROM messages").rows == [(5,)]
    assert run("SELECT discussion_id FROM discussions").rows == [("trip",)]
    assert run("SELECT count(*) FROM ev_message_appended WHERE agent = 'bob'").rows == [(0,)]
    with pytest.raises(SqlFailed):  # no files are attached for a scoped query
        run("SELECT count(*) FROM log_000.events")
    with pytest.raises(SqlFailed):  # no agent column: nothing says whose rows they are
        run("SELECT * FROM fold_failed")


def test_a_scoped_query_on_the_files_sees_only_its_agents_rows(home):
    _sees_only_alice(lambda sql: run_readonly(sql, _files(home), agents=["alice"]))
    assert run_readonly("SELECT count(*) FROM events", _files(home), agents=[]).rows == [(0,)]


def test_a_scoped_query_in_the_writers_process_sees_only_its_agents_rows(live):
    _sees_only_alice(lambda sql: live.sql(sql, agents=["alice"]))


def test_the_apis_sql_operation_is_confined_limited_and_scoped(home):
    from engram.api import types as t
    from engram.api.errors import ApiError
    from engram.api.service import Api
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    api = Api(InProcessRuntime(load_service_config(home), groups=[], wall_clock=False, auto_settle=False).start())
    try:
        for sql in ("DELETE FROM events", "SELECT * FROM read_text('/etc/hostname')", "ATTACH ':memory:' AS x"):
            with pytest.raises(ApiError) as refused:
                api.run_sql(t.SqlRequest(query=sql))
            assert refused.value.code == "bad_query" and "\n" not in refused.value.message
        assert api.run_sql(t.SqlRequest(query="SELECT count(*) AS n FROM messages")).rows == [[8]]
        scoped = api.run_sql(t.SqlRequest(query="SELECT DISTINCT agent FROM messages"), agents=["alice"])
        assert scoped.rows == [["alice"]]
        many = api.run_sql(t.SqlRequest(query="SELECT * FROM range(20000)"))
        assert len(many.rows) == 10_000 and many.truncated
    finally:
        api.close()
    assert _count(home) == 8


def _sees_every_view(run) -> None:
    views = {r[0] for r in run("SELECT view_name FROM duckdb_views() WHERE NOT internal").rows}
    assert {"events", "messages", "discussions", "ev_message_appended"} <= views
    assert run("SELECT count(*) FROM messages").rows[0][0] > 0  # and a query naming a view gets its rows


def test_a_query_of_the_catalog_sees_every_view_engram_offers(live):
    _sees_every_view(live.sql)
    _sees_every_view(lambda sql: live.sql(sql, agents=["alice"]))


def test_a_query_of_the_catalog_on_the_files_sees_every_view_engram_offers(home):
    _sees_every_view(lambda sql: run_readonly(sql, _files(home)))

"""SQL over the log: the events view decodes payload fields, plus per-type views and messages."""

from tests.events.helpers import write

from engram.config.home import ProjectionPaths
from engram.shard.host import ShardHost
from engram.sql import views as sqlviews


def test_events_view_has_typed_payload_columns_and_messages_view_reads_the_conversation(tmp_path):
    host = ShardHost(tmp_path / "log" / "shard-000.duckdb", tmp_path / "proj")
    try:
        host.append_many([write("d1", range(3))])
        host.wait_projections(host.head())
        _, rows = host.query("SELECT seq, type, role, content, token_estimate FROM events ORDER BY seq LIMIT 1")
        assert rows == [(1, "MessageAppended", "user", "message number 0", 5)]
        _, rows = host.query("SELECT discussion_id, role, content FROM messages ORDER BY seq")
        assert [r[2] for r in rows] == ["message number 0", "message number 1", "message number 2"]
        _, rows = host.query("SELECT count(*) FROM ev_message_appended")
        assert rows == [(3,)]
    finally:
        host.close()
    # The same views, read-only from another session once the writer is gone.
    con = sqlviews.open_readonly({0: tmp_path / "log" / "shard-000.duckdb"}, ProjectionPaths(tmp_path / "proj"))
    assert con.execute("SELECT discussion_id, messages FROM discussions").fetchall() == [("d1", 3)]
    assert con.execute("SELECT count(*) FROM messages").fetchall() == [(3,)]


def test_payload_field_types_follow_the_catalogue():
    cols = sqlviews.payload_columns()
    assert cols["content"] == "VARCHAR" and cols["token_estimate"] == "BIGINT" and cols["buffered"] == "BOOLEAN"
    assert cols["message_ids"] == "JSON"

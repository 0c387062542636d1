"""A live shard's checkpoint writes its table projections in one transaction (one commit, not one per projection),
and a write that fails loses nothing: every projection is folded again from its last checkpoint."""

import duckdb
from tests.events.helpers import T0, msg, write

from engram.events.envelope import NewEvent, Write
from engram.projections import registry
from engram.projections.base import TableProjection
from engram.shard.host import ShardHost


def _discussions(host: ShardHost) -> dict[str, int]:
    return dict(host.query("SELECT discussion_id, messages FROM discussions")[1])


def _rows(host: ShardHost, sql: str) -> list[tuple]:
    """What the shard's projection database holds (tables engram's own query sessions do not show)."""
    return host.runner.projections[0].ctx.db.execute(sql).fetchall()


class Watcher(TableProjection):
    """Written after the discussion index: what another connection sees of the index's rows while this one writes."""

    name = "test-watcher"
    interests = frozenset({"MessageAppended"})
    seen: list[int] = []

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        pass

    def apply(self, rec) -> None:
        pass

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        other = self.ctx.db.cursor()
        try:
            Watcher.seen.append(other.execute("SELECT coalesce(sum(messages), 0) FROM proj.discussions").fetchone()[0])
        finally:
            other.close()


class BreaksItsWrite(TableProjection):
    """Folds every message, but cannot write one saying "boom": the checkpoint's transaction fails."""

    name = "test-breaks-its-write"
    tables = ("test_written",)
    interests = frozenset({"MessageAppended"})

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS test_written (seq BIGINT PRIMARY KEY)")
        self.pending: list[tuple[int, str]] = []

    def apply(self, rec) -> None:
        self.pending.append((rec.seq, rec.event.content))

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        pending, self.pending = self.pending, []
        for seq, content in pending:
            if content == "boom":
                raise RuntimeError("this projection cannot write it")
            db.execute("INSERT INTO test_written VALUES (?)", [seq])


class LeavesAResultUnread(TableProjection):
    """Its flush reads one row of a query that has more (as `fetchone` does): the result stays open."""

    name = "test-leaves-a-result-unread"
    interests = frozenset({"MessageAppended"})

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        pass

    def apply(self, rec) -> None:
        pass

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute("SELECT * FROM range(3)").fetchone()


class InsertsArrow(TableProjection):
    """Writes its rows as an Arrow batch (`records.insert_arrow`, which registers the batch with the connection)."""

    name = "test-inserts-arrow"
    tables = ("test_arrow_rows",)
    interests = frozenset({"MessageAppended"})

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS test_arrow_rows (seq BIGINT)")
        self.pending: list[int] = []

    def apply(self, rec) -> None:
        self.pending.append(rec.seq)

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        import pyarrow as pa

        from engram.kernel.records import insert_arrow

        insert_arrow(db, "test_arrow_rows", pa.table({"seq": pa.array(self.pending, pa.int64())}))
        self.pending = []


def test_a_result_one_projection_leaves_unread_does_not_refuse_the_next_one_s_write(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(registry, "PROJECTIONS", ["tests.projections.test_checkpoint:LeavesAResultUnread",
                                                  "tests.projections.test_checkpoint:InsertsArrow",
                                                  *registry.PROJECTIONS])
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "projections", background=False)
    try:
        host.append_many([write("d1", range(0, 3))])
        host.catch_up()
        assert host.status()["fold_failed"] == []
        assert [r[0] for r in _rows(host, "SELECT seq FROM test_arrow_rows ORDER BY seq")] == [1, 2, 3]
        # written in the one transaction, not after it failed and each projection was folded again alone
        assert not [r for r in caplog.records if "could not write" in r.getMessage()]
    finally:
        host.close()


def test_one_checkpoint_writes_every_table_projection_in_one_transaction(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "PROJECTIONS", registry.PROJECTIONS + ["tests.projections.test_checkpoint:Watcher"])
    monkeypatch.setattr(Watcher, "seen", [])
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "projections", background=False)
    try:
        host.append_many([write("d1", range(0, 3))])
        host.catch_up()
        host.append_many([write("d1", range(3, 5))])
        host.catch_up()
        # While the watcher writes, the index's rows of the same checkpoint are not committed yet: one transaction
        # (a commit per projection would show 3, then 5).
        assert Watcher.seen == [0, 3]
        assert _discussions(host) == {"d1": 5}
        positions = dict(_rows(host, "SELECT projection, position FROM projection_positions"))
        assert set(positions.values()) == {host.head()}  # every position written with the rows
    finally:
        host.close()


def test_a_checkpoint_that_fails_to_write_loses_no_projection_s_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "PROJECTIONS",
                        registry.PROJECTIONS + ["tests.projections.test_checkpoint:BreaksItsWrite"])
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "projections", background=False)
    try:
        host.append_many([write("d1", range(0, 3))])
        host.catch_up()
        host.append_many([write("d1", range(3, 5)),
                          Write("d1", "a", (NewEvent(msg(5, content="boom"), T0 + 5_000_000, "m5"),)),
                          write("d2", range(6, 8))])
        host.catch_up()
        # The failed transaction took the index's pending rows with it; they were folded again, not lost.
        assert _discussions(host) == {"d1": 6, "d2": 2}
        assert [r[0] for r in _rows(host, "SELECT seq FROM test_written ORDER BY seq")] == [1, 2, 3, 4, 5, 7, 8]
        failures = host.status()["fold_failed"]
        assert [(f["seq"], f["projection"]) for f in failures] == [(6, "test-breaks-its-write")]
        assert host.verify_replay() == []
    finally:
        host.close()
    reopened = ShardHost(tmp_path / "log.duckdb", tmp_path / "projections", background=False)
    try:
        reopened.catch_up()
        assert _discussions(reopened) == {"d1": 6, "d2": 2}
    finally:
        reopened.close()


def test_a_lone_projection_s_checkpoint_still_commits_its_rows_and_position(tmp_path):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "projections", background=False)
    try:
        host.append_many([write("d1", range(0, 2))])
        host.runner.catch_up(checkpoint=False)
        [index] = [p for p in host.runner.projections if p.name == "discussions"]
        index.checkpoint()
        assert _discussions(host) == {"d1": 2}
        assert dict(_rows(host, "SELECT projection, position FROM projection_positions"))["discussions"] == 2
    finally:
        host.close()


def test_under_sustained_appends_a_checkpoint_waits_a_second_but_a_reader_gets_its_rows_at_once(tmp_path, monkeypatch):
    """Issue 27: while appends keep coming, the fold checkpoints at most once a second (a checkpoint's fixed part, paid
    four times a second under a recall load, was most of the shard's part of a recall); a reader waiting for a
    position still gets it durable at once (`wait_projections`), and a checkpoint falls due after the interval."""
    from engram.shard import host as shard_module

    clock = [1000.0]
    monkeypatch.setattr(shard_module.time, "monotonic", lambda: clock[0])
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live", background=False)
    try:
        host.catch_up()  # checkpointed now (t = 0)
        for k, t in enumerate((0.3, 0.6, 0.9)):  # the fold thread's folds between appends: nothing due yet
            clock[0] = 1000.0 + t
            host.append_many([write(f"d{k}", range(3 * k, 3 * k + 3), agent="agent0")])
            host.catch_up(checkpoint=None)
            assert host.runner.position == host.head() == 3 * k + 3
            assert host.runner.durable_position == 0, f"checkpointed {t} s after the last one"
        assert _discussions(host) == {}
        clock[0] = 1000.0 + 1.05
        host.append_many([write("d3", range(9, 12), agent="agent0")])
        host.catch_up(checkpoint=None)  # due: a second has passed
        assert host.runner.durable_position == 12 and len(_discussions(host)) == 4
        clock[0] += 0.1
        host.append_many([write("d4", range(12, 15), agent="agent0")])
        host.catch_up(checkpoint=None)
        assert host.runner.durable_position == 12
        assert host.wait_projections(15)  # a reader of the rows: durable at once
        assert host.runner.durable_position == 15 and len(_discussions(host)) == 5
    finally:
        host.close()

"""A table projection whose table shape changed (an upgrade) is rebuilt from the log, not read half-fitting."""

from __future__ import annotations

import duckdb

from engram.config.home import ProjectionPaths
from engram.events.envelope import Recorded
from engram.events.messages import MessageAppended
from engram.projections.base import ProjectionContext, TableProjection


class Counted(TableProjection):
    name = "counted"
    tables = ("counted",)
    columns = "n BIGINT"

    def create(self, db):
        db.execute(f"CREATE TABLE IF NOT EXISTS counted ({self.columns})")

    def load(self, db):
        self.loaded = db.execute("SELECT * FROM counted").fetchall()
        self.pending = []

    def apply(self, rec):
        self.pending.append(rec.seq)

    def flush(self, db):
        db.executemany("INSERT INTO counted VALUES (?)", [(s,) for s in self.pending])
        self.pending = []


class CountedV2(Counted):
    version = 2
    columns = "n BIGINT, doubled BIGINT"

    def flush(self, db):
        db.executemany("INSERT INTO counted VALUES (?, ?)", [(s, 2 * s) for s in self.pending])
        self.pending = []


def message(seq: int) -> Recorded:
    ev = MessageAppended(role="user", content=f"m{seq}", message_id=f"m{seq}", token_estimate=1)
    return Recorded(seq=seq, stream="d", stream_version=seq, agent="a", ts_us=seq, event=ev)


def test_a_new_table_version_drops_the_old_tables_and_folds_again_from_the_start(tmp_path):
    db = duckdb.connect(str(tmp_path / "p.duckdb"))
    ctx = ProjectionContext(shard=0, paths=ProjectionPaths(tmp_path), db=db)
    v1 = Counted(ctx)
    v1.apply_batch([message(1), message(2)])
    v1.checkpoint()
    assert Counted(ctx).position == 2 and Counted(ctx).loaded == [(1,), (2,)]  # same version: resumes

    v2 = CountedV2(ctx)
    assert v2.position == 0 and v2.loaded == []  # the old shape is gone; the runner refolds from seq 1
    v2.apply_batch([message(1), message(2), message(3)])
    v2.checkpoint()
    assert CountedV2(ctx).position == 3 and CountedV2(ctx).loaded == [(1, 2), (2, 4), (3, 6)]

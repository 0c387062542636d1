"""A fold that fails on one event quarantines that event (a FoldFailed record) instead of halting the shard."""

import duckdb
import pytest
from tests.events.helpers import T0, write

from engram.events.store import EventStore
from engram.kernel.files import atomic_write
from engram.projections import registry
from engram.projections.base import FileProjection, jsonl
from engram.shard.host import ShardHost


def _discussions(host: ShardHost) -> dict[str, int]:
    return dict(host.query("SELECT discussion_id, messages FROM discussions")[1])


def _plant_raw_row(log_path, seq: int, payload: str, type_: str = "MessageAppended") -> None:
    """A row as an engram from before event validation could have acknowledged it."""
    con = duckdb.connect(str(log_path))
    con.execute(
        "INSERT INTO events VALUES (?, 'd1', (SELECT max(stream_version) + 1 FROM events WHERE stream = 'd1'), ?, 1, "
        "make_timestamptz(?::BIGINT), 'a', NULL, NULL, now(), ?)",
        [seq, type_, T0 + seq, payload],
    )
    con.close()


def test_an_event_that_no_longer_decodes_is_quarantined_and_the_shard_keeps_folding(tmp_path):
    log_path = tmp_path / "log.duckdb"
    store = EventStore(log_path)
    store.append_many([write("d1", range(0, 3))])
    store.close()
    _plant_raw_row(log_path, 4, '{"type":"MessageAppended","role":"user","content":"hi","message_id":"x",'
                                '"token_estimate":1,"name":123}')
    host = ShardHost(log_path, tmp_path / "projections", background=False)
    try:
        host.append_many([write("d1", range(10, 12)), write("d2", range(20, 21))])
        host.catch_up()
        assert _discussions(host) == {"d1": 5, "d2": 1}
        status = host.status()
        assert status["projection_lag"] == 0
        assert status["fold_failed"] == [{"seq": 4, "projection": "*", "type": "MessageAppended",
                                          "error": "ValidationError: Expected `str | null`, got `int` - at `$.name`"}]
        assert host.query("SELECT seq, projection FROM fold_failed")[1] == [(4, "*")]
        assert host.verify_replay() == []
    finally:
        host.close()


class Fragile(FileProjection):
    """A test projection that cannot fold a message saying "boom"."""

    name = "test-fragile"
    interests = frozenset({"MessageAppended"})

    def load(self):
        path = self.ctx.paths.root / "fragile.jsonl"
        self.seen = [line for line in path.read_text().splitlines()] if path.exists() else []

    def apply(self, rec):
        if rec.event.content == "boom":
            raise RuntimeError("this projection cannot fold it")
        self.seen.append(str(rec.seq))

    def write_files(self):
        atomic_write(self.ctx.paths.root / "fragile.jsonl", jsonl([int(s) for s in self.seen]))


@pytest.fixture
def with_fragile(monkeypatch):
    monkeypatch.setattr(registry, "PROJECTIONS", registry.PROJECTIONS + ["tests.projections.test_quarantine:Fragile"])


def test_a_projection_that_fails_on_one_event_leaves_out_only_that_event(tmp_path, with_fragile):
    from engram.events.envelope import NewEvent, Write
    from tests.events.helpers import msg

    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "projections", background=False)
    try:
        host.append_many([write("d1", range(0, 3))])
        host.append_many([Write("d1", "a", (NewEvent(msg(3, content="boom"), T0 + 3_000_000, "m3"),))])
        host.append_many([write("d1", range(4, 6))])
        host.catch_up()
        assert (tmp_path / "projections" / "fragile.jsonl").read_text().split() == ["1", "2", "3", "5", "6"]
        assert _discussions(host) == {"d1": 6}  # the other projections folded every event
        failures = host.status()["fold_failed"]
        assert [(f["seq"], f["projection"]) for f in failures] == [(4, "test-fragile")]
        assert "this projection cannot fold it" in failures[0]["error"]
        assert host.verify_replay() == []
    finally:
        host.close()
    reopened = ShardHost(tmp_path / "log.duckdb", tmp_path / "projections", background=False)
    try:  # the skip was durable: nothing is folded twice or quarantined again after a restart
        reopened.append_many([write("d1", range(6, 7))])
        reopened.catch_up()
        assert (tmp_path / "projections" / "fragile.jsonl").read_text().split() == ["1", "2", "3", "5", "6", "7"]
        assert len(reopened.status()["fold_failed"]) == 1
    finally:
        reopened.close()


def test_status_shows_the_quarantined_event(tmp_path):
    from engram.api.service import Api
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    log_path = tmp_path / "log" / "shard-000.duckdb"
    store = EventStore(log_path)
    store.append_many([write("d1", range(0, 3))])
    store.close()
    _plant_raw_row(log_path, 4, '{"type":"MessageAppended","role":"user","content":"hi","message_id":"x",'
                                '"token_estimate":1,"name":123}')
    api = Api(InProcessRuntime(load_service_config(tmp_path), groups=[], wall_clock=False, auto_settle=False).start())
    try:
        api.rt.wait_projections()
        [shard] = api.status().shards
        [failure] = shard.fold_failed
        assert (failure.seq, failure.type, failure.projection) == (4, "MessageAppended", "*")
        assert failure.error.startswith("ValidationError: Expected `str | null`")
    finally:
        api.close()

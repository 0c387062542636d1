"""Projections are folds of the log: live-built and replayed state are identical, and --as-of works."""

import json
from typing import ClassVar

import duckdb
import pytest
from tests.events.helpers import T0, write

from engram.events.envelope import iso
from engram.events.messages import MessageAppended
from engram.projections import registry
from engram.projections.base import FileProjection, jsonl
from engram.projections.compare import differences
from engram.shard.host import ShardHost


class Transcript(FileProjection):
    """A test file projection: one JSONL transcript per discussion, each line carrying its seq."""

    name = "test-transcript"
    interests = frozenset({"MessageAppended"})

    def load(self):
        self.lines: dict[tuple[str, str], list[dict]] = {}
        self.dirty: set[tuple[str, str]] = set()

    def apply(self, rec):
        key = (rec.agent, rec.stream)
        self.lines.setdefault(key, []).append({"seq": rec.seq, "ts": iso(rec.ts_us), "content": rec.event.content})
        self.dirty.add(key)

    def write_files(self):
        from engram.kernel.files import atomic_write

        for agent, stream in sorted(self.dirty):
            path = self.ctx.paths.agent_dir(agent) / f"{stream}.transcript.jsonl"
            atomic_write(path, jsonl(self.lines[(agent, stream)]))
        self.dirty.clear()


@pytest.fixture
def with_transcript(monkeypatch):
    monkeypatch.setattr(registry, "PROJECTIONS", registry.PROJECTIONS + ["tests.projections.test_replay:Transcript"])


def fill(host: ShardHost, rounds: int = 6) -> None:
    """Appends in several small commits, so the live fold sees many batches."""
    for r in range(rounds):
        host.append_many([write(f"d{r % 3}", range(r * 10, r * 10 + 10), agent=f"agent{(r % 3) % 2}")])


def test_live_and_replayed_projections_are_identical(tmp_path, with_transcript):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")
    try:
        fill(host)
        assert host.wait_projections(host.head())
        assert host.verify_replay() == []
        host.replay_into(tmp_path / "replayed")
    finally:
        host.close()
    assert differences(tmp_path / "live", tmp_path / "replayed") == []
    transcript = (tmp_path / "replayed" / "agents" / "agent0" / "d0.transcript.jsonl").read_bytes()
    assert transcript == (tmp_path / "live" / "agents" / "agent0" / "d0.transcript.jsonl").read_bytes()
    assert len(transcript.splitlines()) == 20


def test_differences_are_reported_when_a_file_changes(tmp_path, with_transcript):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")
    try:
        fill(host, 2)
        host.wait_projections(host.head())
        host.replay_into(tmp_path / "replayed")
    finally:
        host.close()
    victim = tmp_path / "replayed" / "agents" / "agent0" / "d0.transcript.jsonl"
    victim.write_bytes(victim.read_bytes() + b"{}\n")
    assert differences(tmp_path / "live", tmp_path / "replayed") == ["agents/agent0/d0.transcript.jsonl: bytes differ"]


def discussions(db_path):
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return dict(con.execute("SELECT discussion_id, messages FROM discussions").fetchall())
    finally:
        con.close()


def test_replay_as_of_a_position_and_as_of_a_time(tmp_path):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")
    try:
        host.append_many([write("d1", range(0, 10))])  # ts T0 + i s
        host.append_many([write("d2", range(10, 15))])
        report = host.replay_into(tmp_path / "at7", to_seq=7)
        host.replay_into(tmp_path / "at12s", until_us=T0 + 12_000_000)
    finally:
        host.close()
    assert report["events"] == 7
    assert discussions(tmp_path / "at7" / "shard-000.duckdb") == {"d1": 7}
    assert discussions(tmp_path / "at12s" / "shard-000.duckdb") == {"d1": 10, "d2": 3}


def test_a_restart_resumes_exactly_once(tmp_path):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")
    host.append_many([write("d1", range(5))])
    host.wait_projections(host.head())
    host.close()
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")
    try:
        assert host.projection_position() == 5
        host.append_many([write("d1", range(5, 8))])
        host.wait_projections(host.head())
        names, rows = host.query("SELECT messages FROM discussions WHERE discussion_id = 'd1'")
        assert rows == [(8,)]
    finally:
        host.close()


def test_rebuild_after_deleting_projection_files_gives_the_same_state(tmp_path, with_transcript):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")
    try:
        fill(host, 3)
        host.wait_projections(host.head())
        before = (tmp_path / "live" / "agents" / "agent1" / "d1.transcript.jsonl").read_bytes()
        report = host.rebuild()
        assert report["events"] == 30
        after = (tmp_path / "live" / "agents" / "agent1" / "d1.transcript.jsonl").read_bytes()
        assert before == after
        assert host.query("SELECT sum(messages) FROM discussions")[1] == [(30,)]
        host.append_many([write("d9", range(100, 101))])  # still live after the swap
        host.wait_projections(host.head())
        assert host.query("SELECT messages FROM discussions WHERE discussion_id = 'd9'")[1] == [(1,)]
    finally:
        host.close()


def test_forgetting_a_discussion_drops_it_from_the_projection(tmp_path):
    from engram.events.control import DiscussionForgotten

    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")
    try:
        host.append_many([write("d1", range(3)), write("d2", range(3, 5))])
        host.store.append("agent:a", [DiscussionForgotten(discussion_id="d1")], agent="a")
        host.wait_projections(host.head())
        assert host.query("SELECT discussion_id FROM discussions")[1] == [("d2",)]
    finally:
        host.close()


def test_forget_erases_a_discussion_from_log_file_and_projections(tmp_path, with_transcript):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")
    try:
        host.append_many([write("d0", range(0, 3), agent="agent0"), write("d1", range(3, 6), agent="agent0")])
        host.wait_projections(host.head())
        assert (tmp_path / "live" / "agents" / "agent0" / "d0.transcript.jsonl").exists()
        assert host.status()["events_by_type"] == {"MessageAppended": 6}
        report = host.forget("agent0", "d0")
        assert report["events_erased"] == 3
        assert host.status()["events_by_type"] == {"DiscussionForgotten": 1, "MessageAppended": 3, "Purged": 3}
        assert host.query("SELECT discussion_id FROM discussions")[1] == [("d1",)]
        assert not (tmp_path / "live" / "agents" / "agent0" / "d0.transcript.jsonl").exists()
        assert (tmp_path / "live" / "agents" / "agent0" / "d1.transcript.jsonl").exists()
        assert host.verify_replay() == []
        with pytest.raises(KeyError, match="has no discussion 'nope'"):
            host.forget("agent0", "nope")
    finally:
        host.close()
    assert b"message number 1" not in (tmp_path / "log.duckdb").read_bytes()
    assert b"message number 4" in (tmp_path / "log.duckdb").read_bytes()


def test_status_counts_every_event_by_type_as_the_log_grows(tmp_path):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live", background=False)
    try:
        assert host.status()["events_by_type"] == {}
        host.append_many([write("d0", range(0, 3), agent="agent0")])
        assert host.status()["events_by_type"] == {"MessageAppended": 3}
        host.append_many([write("d1", range(3, 5), agent="agent0")])
        status = host.status()
        assert status["events_by_type"] == {"MessageAppended": 5} and status["head"] == 5
    finally:
        host.close()
    reopened = ShardHost(tmp_path / "log.duckdb", tmp_path / "live", background=False)
    try:
        assert reopened.status()["events_by_type"] == {"MessageAppended": 5}
    finally:
        reopened.close()


def test_a_reader_waiting_for_projections_gets_them_durable_without_waiting_for_the_checkpoint_interval(tmp_path, monkeypatch):
    import time

    from engram.shard import host as shard_module

    monkeypatch.setattr(shard_module, "PROJECTION_CHECKPOINT_S", 3600.0)
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")  # with its fold thread
    try:
        for k in range(5):
            host.append_many([write(f"d{k}", range(3 * k, 3 * k + 3), agent="agent0")])
            started = time.monotonic()
            assert host.wait_projections(host.head(), timeout=10)
            assert time.monotonic() - started < 2.0
        assert set(host.status()["projections"].values()) == {15}
        assert host.query("SELECT count(*) FROM discussions")[1] == [(5,)]
    finally:
        host.close()

"""Policies: decisions appended with deterministic ids, snapshots, exactly-once effect after a restart."""

import gc
import json
import time

import pytest

from tests.events.helpers import write

from engram.config.home import Home
from engram.events.envelope import NewEvent, Write
from engram.events.messages import ToolCallFailed
from engram.policies.base import Policy, PolicyContext
from engram.policies.host import PolicyHost
from engram.shard.host import ShardHost


class EveryThirdMessage(Policy):
    """Test policy: after every third message of a stream, record a (fake) tool failure event."""

    name = "every-third"
    interests = frozenset({"MessageAppended"})

    def __init__(self, ctx):
        super().__init__(ctx)
        self.counts: dict[str, int] = {}

    def handle(self, batch):
        out = []
        for rec in batch:
            n = self.counts[rec.stream] = self.counts.get(rec.stream, 0) + 1
            if n % 3 == 0:
                out.append(Write(stream=f"agent:{rec.agent}", agent=rec.agent, events=(
                    NewEvent(event=ToolCallFailed(tool="count", error=f"{rec.stream}:{n}"), ts_us=rec.ts_us,
                             event_id=f"every-third:{rec.seq}", causation=rec.seq),)))
        return out

    def state(self):
        return self.counts

    def restore(self, state):
        self.counts = state


def make_host(shard: ShardHost, home: Home) -> PolicyHost:
    policy = EveryThirdMessage(PolicyContext(shard=0, home=home))
    return PolicyHost([policy], read=shard.read, append=shard.append_many, head=shard.head, state_dir=home.root / "state")


def decisions(shard: ShardHost) -> list[str]:
    return [r.event.error for r in shard.read(0, types=["ToolCallFailed"], limit=None)]


def test_a_policy_appends_its_decisions_and_records_its_position(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(7))])
        host = make_host(shard, home)
        host.run_until_caught_up()
        assert decisions(shard) == ["d1:3", "d1:6"]
        assert host.position == shard.head()  # its own decisions (of no interest) count as seen
        sidecar = json.loads((home.root / "state" / "every-third.shard-000.member-000.position.json").read_text())
        assert sidecar["position"] == shard.head()
        caused = [r.causation for r in shard.read(0, types=["ToolCallFailed"], limit=None)]
        assert caused == [3, 6]
    finally:
        shard.close()


def test_after_a_crash_rehandled_events_append_nothing_twice(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(3))])
        host = make_host(shard, home)
        host.run_until_caught_up()
        snapshot = (home.root / "state" / "every-third.shard-000.member-000.pickle").read_bytes()
        shard.append_many([write("d1", range(3, 6))])
        host.run_until_caught_up()
        assert decisions(shard) == ["d1:3", "d1:6"]
        # Crash: the snapshot on disk is the older one; the restarted host handles 4..6 again.
        (home.root / "state" / "every-third.shard-000.member-000.pickle").write_bytes(snapshot)
        restarted = make_host(shard, home)
        restarted.run_until_caught_up()
        assert decisions(shard) == ["d1:3", "d1:6"]
        shard.append_many([write("d1", range(6, 9))])
        restarted.run_until_caught_up()
        assert decisions(shard) == ["d1:3", "d1:6", "d1:9"]
    finally:
        shard.close()


def test_a_failing_policy_retries_later_without_losing_events(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(3))])
        host = make_host(shard, home)
        policy = host.policies[0]
        original = policy.handle
        policy.handle = lambda batch: (_ for _ in ()).throw(RuntimeError("LLM unreachable"))
        host.pump()
        assert host.errors == {"every-third": "RuntimeError('LLM unreachable')"}
        assert policy.position == 0
        policy.handle = original
        host.run_until_caught_up()
        assert decisions(shard) == ["d1:3"] and host.errors == {}
    finally:
        shard.close()


def test_a_long_import_is_decided_in_parts_and_the_progress_shows_each_part_handled_and_who_is_behind(tmp_path):
    """A policy with `handle_batch` decides a long import part by part: each part's decisions are in the log, and its
    position past the part, before the next part is decided, so waiting for memory sees the import move (it sat at
    the head before the import until the whole import was decided) and names this policy as the one behind."""
    from engram.kernel.idle import furthest_behind

    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(12))])
        shard.wait_projections(shard.head(), timeout=30)
        host = make_host(shard, home)
        policy = host.policies[0]
        policy.handle_batch = 3
        seen, original = [], policy.handle

        def handle(batch):
            # What `engram ingest` shows while this part is decided: every projection and policy position.
            positions = {**shard.progress()["projections"], **host.positions()}
            seen.append((len(batch), decisions(shard), furthest_behind(shard.head(), positions)))
            return original(batch)

        policy.handle = handle
        host.pump()
        assert [(n, made) for n, made, _ in seen] == [(3, []), (3, ["d1:3"]), (3, ["d1:3", "d1:6"]), (3, ["d1:3", "d1:6", "d1:9"])]
        assert [progress for _, _, progress in seen] == [(0, ("every-third",)), (3, ("every-third",)),
                                                         (6, ("every-third",)), (9, ("every-third",))]
        host.run_until_caught_up()  # its own decisions, appended meanwhile, are of no interest to it
        assert furthest_behind(shard.head(), host.positions()) == (shard.head(), ())
    finally:
        shard.close()


class Seen(Policy):
    """Test policy: remembers the messages it was given, decides nothing."""

    name = "seen"
    interests = frozenset({"MessageAppended"})

    def __init__(self, ctx):
        super().__init__(ctx)
        self.seqs: list[int] = []

    def handle(self, batch):
        self.seqs += [r.seq for r in batch]
        return []


def test_a_policy_hosted_beside_one_that_decides_in_parts_moves_with_it_part_by_part(tmp_path):
    """The mood tracker shares auto-ingest's actor: it used to wait for auto-ingest's whole import before its
    turn, and its position (the slowest of all) held the progress line at the head before the import."""
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(12))])
        parts = EveryThirdMessage(PolicyContext(shard=0, home=home))
        parts.handle_batch = 3
        beside = Seen(PolicyContext(shard=0, home=home))
        host = PolicyHost([parts, beside], read=shard.read, append=shard.append_many, head=shard.head,
                          state_dir=home.root / "state")
        positions, original = [], parts.handle

        def handle(batch):
            positions.append(dict(host.positions()))
            return original(batch)

        parts.handle = handle
        host.pump()
        assert positions == [{"every-third": 0, "seen": 0}, {"every-third": 3, "seen": 3},
                             {"every-third": 6, "seen": 6}, {"every-third": 9, "seen": 9}]
        assert beside.seqs == list(range(1, 13))  # every message once, in order
        host.run_until_caught_up()
        assert decisions(shard) == ["d1:3", "d1:6", "d1:9", "d1:12"] and host.position == shard.head()
    finally:
        shard.close()


def test_a_policy_that_fails_in_the_middle_of_a_long_import_resumes_without_losing_or_repeating_a_decision(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(12))])
        host = make_host(shard, home)
        policy = host.policies[0]
        policy.handle_batch = 3
        calls, original = [], policy.handle

        def handle(batch):
            calls.append(len(batch))
            if len(calls) == 3:
                raise RuntimeError("LLM unreachable")
            return original(batch)

        policy.handle = handle
        host.pump()
        assert host.errors == {"every-third": "RuntimeError('LLM unreachable')"}
        assert decisions(shard) == ["d1:3", "d1:6"]  # the parts decided before the failure are in the log
        host.policies[0].handle_batch = 3
        host.run_until_caught_up()
        assert decisions(shard) == ["d1:3", "d1:6", "d1:9", "d1:12"] and host.errors == {}
        assert host.position == shard.head()
    finally:
        shard.close()


SNAPSHOT = "every-third.shard-000.member-000.pickle"


class Detonator:
    """Unpickling this runs code: a snapshot must never be unpickled before its header is checked."""

    fired = False

    def __reduce__(self):
        return (_fire, ())


def _fire():
    Detonator.fired = True
    return {}


def _restart_with_snapshot(tmp_path, data: bytes):
    """A home whose log holds six messages and whose snapshot file holds `data`; the restarted host caught up."""
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    shard.append_many([write("d1", range(6))])
    host = make_host(shard, home)
    host.run_until_caught_up()
    (home.root / "state" / SNAPSHOT).write_bytes(data)
    restarted = make_host(shard, home)
    reason = restarted.rebuilt.get("every-third")
    position_after_load = restarted.policies[0].position
    restarted.run_until_caught_up()
    return shard, restarted, reason, position_after_load


def test_a_snapshot_of_another_state_version_is_rebuilt_from_the_log_and_never_unpickled(tmp_path, monkeypatch):
    import pickle

    from engram.policies.base import SNAPSHOT_MAGIC, SnapshotHeader
    import hashlib
    import msgspec

    Detonator.fired = False
    body = pickle.dumps(Detonator())
    header = SnapshotHeader(policy="every-third", cls=f"{EveryThirdMessage.__module__}:EveryThirdMessage",
                            state_version=0, position=3, size=len(body), sha256=hashlib.sha256(body).hexdigest())
    shard, host, reason, position = _restart_with_snapshot(tmp_path, SNAPSHOT_MAGIC + msgspec.json.encode(header) + b"\n" + body)
    try:
        assert not Detonator.fired
        assert reason is not None and "v0" in reason and "v1" in reason
        assert position == 0  # rebuilt from the log ...
        assert host.policies[0].counts == {"d1": 6}  # ... to the state the log gives
        assert decisions(shard) == ["d1:3", "d1:6"]  # and its repeated decisions were not appended twice
    finally:
        shard.close()


def test_a_busy_host_writes_its_snapshot_at_intervals_and_at_once_when_caught_up(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    snapshot = home.root / "state" / "every-third.shard-000.member-000.pickle"
    try:
        shard.append_many([write("d1", range(9))])
        host = make_host(shard, home)
        host.batch, host.snapshot_interval_s = 3, 3600.0
        assert [host.pump() for _ in range(3)] == [3, 3, 3]
        assert not snapshot.exists()  # busy: no state pickled after each batch
        host.run_until_caught_up()
        restored = make_host(shard, home).policies[0]
        assert restored.position == shard.head() and restored.counts == {"d1": 9}
        assert decisions(shard) == ["d1:3", "d1:6", "d1:9"]
        host.snapshot_interval_s = 0.0  # due at every batch: written while busy
        shard.append_many([write("d1", range(9, 12))])
        assert host.pump() == 3 and make_host(shard, home).policies[0].counts == {"d1": 12}
    finally:
        shard.close()


def test_a_busy_host_whose_snapshots_are_slow_spends_at_most_a_tenth_of_its_time_writing_them(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(40))])
        host = make_host(shard, home)
        policy = host.policies[0]
        saves = []

        def slow_snapshot(snapshot=policy.snapshot):
            time.sleep(0.1)  # a large memory pickling on a loaded machine
            saves.append(policy.position)
            return snapshot()

        policy.snapshot = slow_snapshot
        host.batch, host.snapshot_interval_s = 1, 0.0  # due at every batch, were it not for its cost
        started = time.monotonic()
        assert sum(host.pump() for _ in range(40)) == 40
        busy = time.monotonic() - started
        assert 1 <= len(saves) < 40 and len(saves) * 0.1 <= 0.1 * busy + 0.1 + 0.05
        host.run_until_caught_up()  # caught up: written at once
        assert saves[-1] == shard.head() and make_host(shard, home).policies[0].counts == {"d1": 40}
    finally:
        shard.close()


def test_a_legacy_snapshot_without_a_header_is_rebuilt_from_the_log(tmp_path):
    import pickle

    Detonator.fired = False
    shard, host, reason, position = _restart_with_snapshot(tmp_path, pickle.dumps({"position": 6, "state": Detonator()}))
    try:
        assert not Detonator.fired and "no snapshot header" in reason and position == 0
        assert host.policies[0].counts == {"d1": 6}
    finally:
        shard.close()


def test_a_damaged_snapshot_is_rebuilt_from_the_log(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    shard.append_many([write("d1", range(6))])
    make_host(shard, home).run_until_caught_up()
    good = (home.root / "state" / SNAPSHOT).read_bytes()
    shard.close()
    shard, host, reason, position = _restart_with_snapshot(tmp_path / "again", good[:-3])
    try:
        assert "damaged" in reason and position == 0 and host.policies[0].counts == {"d1": 6}
    finally:
        shard.close()


def test_a_current_snapshot_is_restored_where_it_left_off(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(4))])
        make_host(shard, home).run_until_caught_up()
        restarted = make_host(shard, home)
        assert restarted.rebuilt == {} and restarted.policies[0].position >= 4
        assert restarted.policies[0].counts == {"d1": 4}
    finally:
        shard.close()


def test_the_host_reports_each_policys_events_and_seconds_per_stage(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(7))])
        host = make_host(shard, home)
        host.run_until_caught_up()
        report = host.timings.report()
        assert report["every-third"]["events"] == 7 and report["(log)"]["events"] == 7
        assert {"decide_s", "append_s", "snapshot_s"} <= set(report["every-third"]) and "read_s" in report["(log)"]
        assert all(v >= 0 for v in report["every-third"].values())
    finally:
        shard.close()


def test_a_host_woken_by_events_it_does_not_read_moves_past_them_without_reading_the_log(tmp_path):
    """What a policy actor does when the shard says only other types arrived (`EventStore.wait_for`)."""
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write("d1", range(3))])
        reads = []
        policy = EveryThirdMessage(PolicyContext(shard=0, home=home))
        host = PolicyHost([policy], read=lambda after, **kw: reads.append(after) or shard.read(after, **kw),
                          append=shard.append_many, head=shard.head, state_dir=home.root / "state")
        host.run_until_caught_up()
        caught = host.position
        shard.append_many([Write(stream="agent:a", agent="a", events=tuple(
            NewEvent(event=ToolCallFailed(tool="t", error=f"e{i}"), ts_us=i) for i in range(4)))])
        interesting, head = shard.wait_for(caught + 1, host.interests(), timeout=1)
        assert (interesting, head) == (False, caught + 4) and host.interests() == ["MessageAppended"]
        before = len(reads)
        host.seen_through(head)
        assert host.position == head and len(reads) == before  # moved on, nothing read
        shard.append_many([write("d1", range(3, 6))])  # a message: read and handled as before
        assert shard.wait_for(head + 1, host.interests(), timeout=1)[0] is True
        host.run_until_caught_up()
        assert [d for d in decisions(shard) if d.startswith("d1:")] == ["d1:3", "d1:6"]
        assert host.position == shard.head()
    finally:
        shard.close()


def test_a_host_keeps_no_second_copy_of_a_large_state_in_memory_and_rolls_back_from_its_file(tmp_path):
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        shard.append_many([write(f"d{i}", range(3)) for i in range(200)])  # 200 streams: a state of 200 counts
        host = make_host(shard, home)
        host.run_until_caught_up()
        snapshot = home.root / "state" / "every-third.shard-000.member-000.pickle"
        assert snapshot.stat().st_size > 1_000
        assert sum(len(v) for v in host._saved.values()) < 500  # digests and positions, not the pickled state
        policy = host.policies[0]
        policy.counts["d0"] = 99  # a decision made in a batch that then fails ...
        host._roll_back(0, policy)
        assert host.policies[0].counts["d0"] == 3  # ... is forgotten: the state is the snapshot file's
    finally:
        shard.close()


class CollectorWatcher(EveryThirdMessage):
    """Notes whether Python's cyclic collector was on while it handled a batch."""

    name = "collector-watcher"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.handling: set[bool] = set()

    def handle(self, batch):
        self.handling.add(gc.isenabled())
        return super().handle(batch)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_while_a_policy_handles_a_batch_and_as_it_was_after(tmp_path, enabled):
    """A policy host's batch (read, decoded, handled, its writes appended) runs with the cyclic collector off
    (engram.kernel.collector): the state it builds is not walked again and again by collections meanwhile. Its own
    writes folded back (`fold_written`) too. Afterwards the collector is as it was."""
    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    was = gc.isenabled()
    try:
        policy = CollectorWatcher(PolicyContext(shard=0, home=home))
        host = PolicyHost([policy], read=shard.read, append=shard.append_many, head=shard.head, state_dir=None)
        gc.enable() if enabled else gc.disable()
        shard.append_many([write("d1", range(7))])
        host.run_until_caught_up()
        assert gc.isenabled() is enabled
        writes = [write("d1", range(7, 8))]
        assert host.fold_written(writes, shard.append_many(writes))
        assert gc.isenabled() is enabled
        assert decisions(shard) == ["d1:3", "d1:6"]
    finally:
        gc.enable() if was else gc.disable()
        shard.close()
    assert policy.handling == {False}


class FoldsRecalls(EveryThirdMessage):
    """Reads messages promptly and recalls' TraceRetrieved unhurried (as working memory does)."""

    name = "folds-recalls"
    interests = frozenset({"MessageAppended", "TraceRetrieved"})
    unhurried = frozenset({"TraceRetrieved"})

    def handle(self, batch):
        return super().handle([r for r in batch if r.type == "MessageAppended"])


def test_a_host_says_whether_its_last_batch_held_an_event_it_reads_promptly(tmp_path):
    """Issue 27: after a batch of unhurried events only, a policy actor waits as for those (the long poll's linger)
    instead of reading the log again after POLICY_LINGER_S: under a recall load it read and answered ~20 times a
    second. `prompted` is what the actor's loop asks."""
    from engram.events.cognitive import TraceRetrieved

    home = Home(tmp_path)
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)
    try:
        host = PolicyHost([FoldsRecalls(PolicyContext(shard=0, home=home))], read=shard.read,
                          append=shard.append_many, head=shard.head, state_dir=home.root / "state")
        assert host.prompt_interests() == ["MessageAppended"]
        shard.append_many([write("d1", range(2))])
        assert host.pump() == 2 and host.prompted
        shard.append_many([Write(stream="d1", agent="agent0", events=tuple(
            NewEvent(event=TraceRetrieved(query=f"q{i}", trace_ids=("t1",)), ts_us=10 + i) for i in range(3)))])
        assert host.pump() == 3 and not host.prompted  # recalls' records only
        shard.append_many([Write(stream="d1", agent="agent0", events=(
            NewEvent(event=TraceRetrieved(query="q9", trace_ids=("t1",)), ts_us=20),))])
        shard.append_many([write("d1", range(2, 3))])
        assert host.pump() == 2 and host.prompted  # a message among them
        host.run_until_caught_up()
        assert host.position == shard.head()
    finally:
        shard.close()

"""The EventStore: gap-free positions, optimistic concurrency, idempotent appends, group commit, reads."""

import threading
import time

import pytest
from tests.events.helpers import T0, msg, write

from engram.events.envelope import NewEvent, Write
from engram.events.messages import MessageAppended
from engram.events.store import AppendError, ConcurrencyConflict, EventStore, PayloadTooLarge


@pytest.fixture
def store(tmp_path):
    s = EventStore(tmp_path / "log.duckdb")
    yield s
    s.close()


def test_positions_are_gap_free_and_stream_versions_count_per_stream(store):
    store.append_many([write("d1", range(3)), write("d2", range(3, 5))])
    store.append_many([write("d1", range(5, 6))])
    rows = store.query("SELECT seq, stream, stream_version FROM events ORDER BY seq")[1]
    assert rows == [(1, "d1", 1), (2, "d1", 2), (3, "d1", 3), (4, "d2", 1), (5, "d2", 2), (6, "d1", 4)]
    assert store.head() == 6


def test_expected_version_conflict_names_stream_and_versions_and_appends_nothing(store):
    store.append_many([write("d1", range(2))])
    with pytest.raises(ConcurrencyConflict, match=r"stream 'd1': expected version 1, but the stream is at version 2"):
        store.append_many([write("d1", range(2, 4), expected=1)])
    assert store.head() == 2
    store.append_many([write("d1", range(2, 4), expected=2)])
    assert store.stream_version("d1") == 4


def test_expected_version_zero_means_a_new_stream(store):
    store.append_many([write("d1", range(1), expected=0)])
    with pytest.raises(ConcurrencyConflict):
        store.append_many([write("d1", range(1, 2), expected=0)])


def test_a_retried_append_returns_the_original_seqs_and_adds_nothing(store):
    first = store.append_many([write("d1", range(3))])[0]
    again = store.append_many([write("d1", range(3))])[0]
    assert again.seqs == first.seqs == (1, 2, 3)
    assert again.duplicates == 3
    assert store.query("SELECT count(*) FROM events")[1] == [(3,)]


def test_idempotency_survives_a_restart(tmp_path):
    path = tmp_path / "log.duckdb"
    s = EventStore(path)
    s.append_many([write("d1", range(3))])
    s.close()
    s = EventStore(path)
    try:
        res = s.append_many([write("d1", range(2, 5))])[0]
        assert res.seqs == (3, 4, 5) and res.duplicates == 1
        assert s.head() == 5
    finally:
        s.close()


def test_a_unit_with_one_bad_write_appends_nothing_of_the_unit(store):
    store.append_many([write("d1", range(1))])
    with pytest.raises(ConcurrencyConflict):
        store.append_many([write("d2", range(10, 12)), write("d1", range(1, 2), expected=5)])
    assert store.head() == 1
    assert store.stream_version("d2") == 0


def test_two_agents_each_have_their_own_stream_of_the_same_id(store):
    store.append_many([write("d1", range(2), agent="alice")])
    bob = store.append_many([write("d1", range(2), agent="bob")])[0]  # the same message ids: bob's own events
    assert bob.duplicates == 0 and bob.stream_version == 2
    assert store.streams() == {("alice", "d1"): 2, ("bob", "d1"): 2}
    assert store.stream_version("d1", "alice") == 2
    rows = store.query("SELECT seq, agent, stream, stream_version FROM events ORDER BY seq")[1]
    assert rows == [(1, "alice", "d1", 1), (2, "alice", "d1", 2), (3, "bob", "d1", 1), (4, "bob", "d1", 2)]
    assert [r.seq for r in store.read_stream("d1", agent="bob")] == [3, 4]
    with pytest.raises(ConcurrencyConflict):  # versions are per (agent, stream)
        store.append_many([write("d1", range(2, 3), agent="bob", expected=1)])
    again = store.append_many([write("d1", range(2), agent="alice")])[0]  # alice's retry: hers, deduplicated
    assert again.seqs == (1, 2) and again.duplicates == 2


def test_a_log_written_with_one_namespace_of_stream_ids_is_migrated_on_open(tmp_path):
    """A log of schema 1 (`UNIQUE (stream, stream_version)`, no `log_schema`), as engram wrote it before discussion
    ids per agent: opening it for writing re-creates the table under the new key with every row as it was, once."""
    import duckdb

    path = tmp_path / "log.duckdb"
    s = EventStore(path)
    s.append_many([write("d1", range(3), agent="alice"), write("agent:alice", range(3, 4), agent="alice")])
    s.close()
    con = duckdb.connect(str(path))  # back to schema 1: the old constraint, no version table
    con.execute("DROP TABLE log_schema")
    con.execute("ALTER TABLE events RENAME TO events_new")
    con.execute(SCHEMA_V1)
    con.execute("INSERT INTO events SELECT * FROM events_new")
    con.execute("DROP TABLE events_new")
    before = con.execute("SELECT * FROM events ORDER BY seq").fetchall()
    con.close()

    s = EventStore(path)
    try:
        assert s.schema_version() == 2
        assert s.query("SELECT * FROM events ORDER BY seq")[1] == before
        assert s.append_many([write("d1", range(3), agent="alice")])[0].duplicates == 3  # ids carried over
        assert s.append_many([write("d1", range(1), agent="bob")])[0].seqs == (5,)  # bob's own d1 now
    finally:
        s.close()
    s = EventStore(path)  # opening it again migrates nothing
    try:
        assert s.schema_version() == 2 and s.head() == 5
        assert s.query("SELECT count(*) FROM log_schema")[1] == [(1,)]
    finally:
        s.close()


SCHEMA_V1 = """
CREATE TABLE events (
    seq BIGINT NOT NULL, stream VARCHAR NOT NULL, stream_version BIGINT NOT NULL, type VARCHAR NOT NULL,
    schema_version INTEGER NOT NULL, ts TIMESTAMPTZ NOT NULL, agent VARCHAR NOT NULL, causation BIGINT,
    event_id VARCHAR, recorded_at TIMESTAMPTZ NOT NULL, payload JSON NOT NULL, UNIQUE (stream, stream_version)
);
"""


def test_oversized_payload_is_rejected_by_name(tmp_path):
    s = EventStore(tmp_path / "log.duckdb", max_payload_bytes=200)
    try:
        with pytest.raises(PayloadTooLarge, match="MessageAppended for stream 'd1' is .* bytes; the limit is 200"):
            s.append("d1", [msg(1, "x" * 500)], agent="a")
        assert s.head() == 0
    finally:
        s.close()


def test_reads_by_position_stream_type_agent_and_time(store):
    store.append_many([write("d1", range(5), agent="a"), write("d2", range(5, 8), agent="b")])
    assert [r.seq for r in store.read(3)] == [4, 5, 6, 7, 8]
    assert [r.seq for r in store.read(0, limit=2)] == [1, 2]
    assert [r.seq for r in store.read(0, to_seq=2)] == [1, 2]
    assert [r.event.message_id for r in store.read(0, stream="d2")] == ["m5", "m6", "m7"]
    assert [r.seq for r in store.read(0, agent="b")] == [6, 7, 8]
    assert store.read(0, types=["ClockTick"]) == []
    assert len(store.read(0, types=["MessageAppended"])) == 8
    # ts of message i is T0 + i seconds
    assert [r.seq for r in store.read(0, since_us=T0 + 2_000_000, until_us=T0 + 4_000_000)] == [3, 4, 5]
    rec = store.read(0, limit=1)[0]
    assert rec.ts_us == T0 and rec.ts.isoformat() == "2023-11-14T22:13:20+00:00"
    assert [r.stream_version for r in store.read_stream("d1", from_version=4)] == [4, 5]


def test_iter_events_reads_everything_in_batches(store):
    store.append_many([write("d1", range(25))])
    assert [r.seq for r in store.iter_events(0, batch=7)] == list(range(1, 26))


def test_wait_gives_read_your_writes_across_threads(store):
    results = []
    waiter = threading.Thread(target=lambda: results.append(store.wait(3, timeout=5)))
    waiter.start()
    store.append_many([write("d1", range(3))])
    waiter.join()
    assert results == [True]
    assert store.wait(99, timeout=0.05) is False


def _retrieved(stream: str, n: int) -> Write:
    from engram.events.cognitive import TraceRetrieved

    return Write(stream=stream, agent="a", events=tuple(
        NewEvent(event=TraceRetrieved(query=f"q{i}", trace_ids=("t1",)), ts_us=T0 + i) for i in range(n)))


def test_a_reader_of_some_event_types_learns_when_only_other_types_were_appended(store, tmp_path):
    store.append_many([write("d1", range(2))])  # seqs 1-2: messages
    store.append_many([_retrieved("d1", 3)])  # seqs 3-5: recalls' TraceRetrieved
    assert store.wait_for(3, ["MessageAppended"], timeout=1) == (False, 5)  # nothing to read: move past 5
    assert store.wait_for(3, ["TraceRetrieved"], timeout=1) == (True, 5)
    assert store.wait_for(3, None, timeout=1) == (True, 5)  # a reader of every type
    assert store.wait_for(6, ["MessageAppended"], timeout=0.05) == (False, 5)  # nothing new: timed out
    store.append_many([write("d1", range(2, 3))])  # seq 6: a message
    assert store.wait_for(3, ["MessageAppended"], timeout=1) == (True, 6)
    store.close()
    reopened = EventStore(tmp_path / "log.duckdb")  # events found at open: their types are not tracked
    try:
        assert reopened.wait_for(1, ["ToolCallFailed"], timeout=1) == (True, 6)
        reopened.append_many([_retrieved("d1", 1)])
        assert reopened.wait_for(7, ["ToolCallFailed"], timeout=1) == (False, 7)
    finally:
        reopened.close()


def test_a_waiting_reader_of_other_types_wakes_with_the_head_of_an_append_it_does_not_read(store):
    results = []
    waiter = threading.Thread(target=lambda: results.append(store.wait_for(1, ["MessageAppended"], timeout=5)))
    waiter.start()
    store.append_many([_retrieved("d1", 2)])
    waiter.join()
    assert results == [(False, 2)]


def _waiting(store, *args, **kwargs):
    results: list = []
    waiter = threading.Thread(target=lambda: results.append(store.wait_for(*args, **kwargs)))
    waiter.start()
    return waiter, results


def test_a_reader_lingering_past_appends_it_does_not_read_wakes_at_the_first_it_reads(store):
    waiter, results = _waiting(store, 1, ["MessageAppended"], timeout=5, linger=5)
    store.append_many([_retrieved("d1", 2)])  # seqs 1-2: not read, the reader goes on waiting ...
    time.sleep(0.05)
    assert results == []
    store.append_many([write("d1", range(1))])  # ... seq 3: a message, it wakes with the head
    waiter.join(5)
    assert results == [(True, 3)]


def test_a_lingering_reader_moves_past_what_it_does_not_read_after_its_linger_or_when_nudged(store):
    store.append_many([_retrieved("d1", 2)])
    started = time.monotonic()
    assert store.wait_for(1, ["MessageAppended"], timeout=5, linger=0.1) == (False, 2)
    assert 0.1 <= time.monotonic() - started < 4
    waiter, results = _waiting(store, 1, ["MessageAppended"], timeout=30, linger=30)
    time.sleep(0.05)
    store.nudge()  # someone waits for idle: every reader at the head now
    waiter.join(5)
    assert results == [(False, 2)]


def test_events_a_reader_reads_unhurried_end_its_wait_after_the_linger_and_are_read(store):
    started = time.monotonic()
    waiter, results = _waiting(store, 1, ["MessageAppended", "TraceRetrieved"], timeout=5, linger=0.2,
                               prompt=["MessageAppended"])
    store.append_many([_retrieved("d1", 2)])  # read, but not prompt: the wait goes on for the linger ...
    waiter.join(5)
    assert results == [(True, 2)]  # ... then ends saying there is something to read
    assert time.monotonic() - started >= 0.2


def test_group_commit_gathers_concurrent_appends_into_few_transactions(store, monkeypatch):
    commits = []
    original = store._insert

    def counting_insert(segments):
        commits.append(sum(len(fresh) for _, fresh, _, _ in segments))
        original(segments)

    monkeypatch.setattr(store, "_insert", counting_insert)
    errors = []

    def writer(w: int):
        try:
            for i in range(50):
                store.append(f"s{w}", [msg(w * 1000 + i)], agent="a")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.head() == 400 and sum(commits) == 400
    assert store.query("SELECT count(DISTINCT seq), min(seq), max(seq) FROM events")[1] == [(400, 1, 400)]
    # Each writer's events stay in its own order with consecutive stream versions.
    for w in range(8):
        versions = [r.stream_version for r in store.read(0, stream=f"s{w}", limit=None)]
        assert versions == list(range(1, 51))
    assert len(commits) < 400  # some appends shared a commit


def test_a_failing_commit_acknowledges_nobody_and_leaves_no_gap(store, monkeypatch):
    store.append_many([write("d1", range(2))])

    def broken(segments):
        raise RuntimeError("disk full")

    monkeypatch.setattr(store, "_insert", broken)
    with pytest.raises(AppendError, match="commit failed: disk full"):
        store.append_many([write("d1", range(2, 4))])
    monkeypatch.undo()
    res = store.append_many([write("d1", range(2, 4))])[0]
    assert res.seqs == (3, 4)


def test_read_only_store_refuses_appends(tmp_path):
    path = tmp_path / "log.duckdb"
    EventStore(path).close()
    ro = EventStore(path, read_only=True)
    try:
        with pytest.raises(AppendError, match="read-only"):
            ro.append("d1", [msg(1)], agent="a")
    finally:
        ro.close()


def test_purge_erases_a_stream_and_what_it_caused_but_keeps_positions(tmp_path):
    from engram.events.control import DiscussionForgotten
    from engram.events.envelope import NewEvent
    from engram.events.messages import ToolCallFailed
    from engram.kernel.files import compact_database

    path = tmp_path / "log.duckdb"
    store = EventStore(path)
    store.append_many([write("d1", range(3)), write("d2", range(3, 5))])
    # A derived event in another stream, caused by message seq 2 of d1, and one caused by d2.
    store.append("agent:a", [NewEvent(event=ToolCallFailed(tool="t", error="secret from d1"), ts_us=T0, causation=2)], agent="a")
    store.append("agent:a", [NewEvent(event=ToolCallFailed(tool="t", error="from d2"), ts_us=T0, causation=4)], agent="a")
    store.append("agent:a", [DiscussionForgotten(discussion_id="d1")], agent="a")
    assert store.purge_streams(["d1"]) == 4
    rows = store.query("SELECT seq, type FROM events ORDER BY seq")[1]
    assert rows == [(1, "Purged"), (2, "Purged"), (3, "Purged"), (4, "MessageAppended"), (5, "MessageAppended"),
                    (6, "Purged"), (7, "ToolCallFailed"), (8, "DiscussionForgotten")]
    assert [r.event.original_type for r in store.read(0, stream="d1")] == ["MessageAppended"] * 3
    store.close()
    compact_database(path)
    assert b"message number 1" not in path.read_bytes() and b"secret from d1" not in path.read_bytes()
    assert b"message number 4" in path.read_bytes()
    store = EventStore(path)
    assert store.head() == 8 and store.stream_version("d1") == 3
    store.close()


def test_small_and_large_commits_store_the_same_rows(tmp_path):
    from engram.events.store import SMALL_COMMIT_ROWS

    small, large = EventStore(tmp_path / "small.duckdb"), EventStore(tmp_path / "large.duckdb")
    try:
        n = SMALL_COMMIT_ROWS + 10
        for i in range(n):  # one event per commit: the VALUES path
            small.append_many([write("d1", range(i, i + 1))])
        large.append_many([write("d1", range(n))])  # one commit: the Arrow path
        cols = "seq, stream, stream_version, type, schema_version, ts, agent, causation, event_id, payload"
        assert small.query(f"SELECT {cols} FROM events ORDER BY seq")[1] == large.query(f"SELECT {cols} FROM events ORDER BY seq")[1]
    finally:
        small.close()
        large.close()


def test_rows_read_undecoded_become_the_same_events_in_another_process(store):
    import pickle

    from engram.events.store import decode_rows

    store.append_many([write("d1", range(4)), write("d2", range(4, 6), agent="bob")])
    rows = store.read_rows(1, types=["MessageAppended"], limit=3)
    shipped = pickle.loads(pickle.dumps(rows))  # what crosses to a policy actor
    assert decode_rows(shipped, store.shard) == store.read(1, types=["MessageAppended"], limit=3)
    assert [r.seq for r in decode_rows(shipped)] == [2, 3, 4]


def test_rows_moved_between_logs_keep_their_positions_and_a_refused_move_changes_nothing(tmp_path):
    parent, child = EventStore(tmp_path / "parent.duckdb"), EventStore(tmp_path / "child.duckdb")
    try:
        parent.append_many([write("d1", range(3), agent="a"), write("d2", range(3, 5), agent="b")])
        moved = parent.export_agents(["b"])
        assert child.import_rows(moved) == 2
        assert child.head() == 5
        assert child.query("SELECT seq, stream, stream_version FROM events ORDER BY seq")[1] == [(4, "d2", 1), (5, "d2", 2)]
        assert parent.remove_agents(["b"]) == 2 and parent.head() == 3

        # A stream that does not continue where this log has it: refused, nothing written, the head stays.
        other = EventStore(tmp_path / "other.duckdb")
        try:
            other.append_many([write("x", range(9, 10), agent="c")])
            with pytest.raises(AppendError, match="does not continue"):
                other.import_rows(parent.export_agents(["a"]).slice(1))  # d1 (seqs 2-3) from its version 2
            assert other.head() == 1
            assert other.query("SELECT count(*) FROM events")[1] == [(1,)]
            other.append_many([write("y", range(20, 21), agent="c")])  # the next position is still 2
            assert other.query("SELECT max(seq) FROM events")[1] == [(2,)]
        finally:
            other.close()
    finally:
        parent.close()
        child.close()


def test_a_forgotten_stream_id_is_used_again_with_none_of_its_old_event_ids_counting_as_recorded(store):
    """A deleted memory's tombstones keep their event ids (so a policy deciding it again is acknowledged without
    writing it); forgetting the whole discussion takes those ids too, so its agent's new discussion of the same id
    records every event it is sent, and another agent's stream of that id keeps its own."""
    from engram.events.erasure import plan

    store.append_many([write("d1", range(3), agent="alice"), write("d1", range(3), agent="bob")])
    assert store.erase([2], keep_ids=True) == 1  # one of alice's, as a deleted memory leaves it
    erasure = plan(store, ["d1"], agent="alice")
    assert erasure.seqs == [1, 2, 3]
    store.erase(erasure.seqs)
    again = store.append_many([write("d1", range(3), agent="alice")])[0]
    assert again.duplicates == 0 and again.seqs == (7, 8, 9) and again.stream_version == 6
    assert store.append_many([write("d1", range(3), agent="bob")])[0].duplicates == 3
    assert store.query("SELECT count(*) FROM events WHERE agent = 'bob' AND type = 'MessageAppended'")[1] == [(3,)]


def test_an_event_id_repeated_in_one_write_in_one_unit_or_in_one_group_commit_is_recorded_once(store):
    from engram.events.store import EventIdConflict, _Pending

    def w(stream, events):  # (i, event id, content)
        return Write(stream=stream, agent="a", events=tuple(
            NewEvent(event=msg(i, content), ts_us=T0 + i, event_id=eid) for i, eid, content in events))

    # in one write, and again in the next write of the unit: the first stands, the repeats name its seq
    res = store.append_many([w("d1", [(1, "m1", "hi"), (2, "m2", "yo"), (1, "m1", "hi")]),
                             w("d1", [(2, "m2", "yo"), (3, "m3", "hey")])])
    assert [r.seqs for r in res] == [(1, 2, 1), (2, 3)] and [r.duplicates for r in res] == [1, 1]
    assert store.stream_version("d1", "a") == 3
    # the same id with other words, in one write or in a later unit: refused, nothing of the unit written
    with pytest.raises(EventIdConflict, match=r"message id 'm4'"):
        store.append_many([w("d1", [(4, "m4", "one"), (4, "m4", "another")])])
    with pytest.raises(EventIdConflict, match=r"seq 2"):
        store.append_many([w("d2", [(9, "m9", "fine")]), w("d1", [(2, "m2", "changed")])])
    assert store.head() == 3
    # two callers' units in one group commit: the second repeats the first's id (acknowledged with its seq) and
    # a third changes its words (refused alone)
    units = [_Pending([w("d3", [(5, "m5", "a"), (6, "m6", "b")])], 1 << 20),
             _Pending([w("d3", [(6, "m6", "b"), (7, "m7", "c")])], 1 << 20),
             _Pending([w("d3", [(5, "m5", "not a")])], 1 << 20)]
    store._commit(units)
    assert [u.results[0].seqs for u in units[:2]] == [(4, 5), (5, 6)]
    assert isinstance(units[2].error, EventIdConflict) and "seq 4" in str(units[2].error)
    assert store.head() == 6 and store.stream_version("d3", "a") == 3
    # the ids of that commit are known afterwards: sent again, nothing is written
    assert store.append_many([w("d3", [(7, "m7", "c"), (5, "m5", "a")])])[0].seqs == (6, 4)
    assert store.head() == 6


def test_the_log_folds_its_wal_at_64_mib_and_a_reopened_log_holds_every_event(tmp_path):
    """The writer raises DuckDB's checkpoint threshold (16 MiB by default: a bulk append stalled at each fold); what a
    closed log holds is unchanged, and a read-only opening leaves the setting alone."""
    from engram.events.store import CHECKPOINT_THRESHOLD

    store = EventStore(tmp_path / "log.duckdb")
    assert CHECKPOINT_THRESHOLD == "64MiB"
    assert store._con.execute("SELECT current_setting('checkpoint_threshold')").fetchone()[0] == "64.0 MiB"
    store.append_many([write("d", range(50))])
    store.close()
    again = EventStore(tmp_path / "log.duckdb", read_only=True)
    assert again.head() == 50
    again.close()


def test_a_bulk_commit_of_several_writes_stores_what_the_event_by_event_path_stores(tmp_path):
    """A commit of several large writes (each encoded as JSON lines in one call, the commit's Arrow batch made of
    their columns) holds the same rows, byte for byte, as the same events appended one per commit (the VALUES path,
    each payload encoded alone): types mixed in a write, causations, ids on some events only, text with newlines,
    quotes, tabs and non-ASCII characters."""
    from engram.events.cognitive import EdgeAdded
    from engram.events.store import SMALL_COMMIT_ROWS, _encode

    texts = ["line one\nline two", 'a "quoted" word\tand a tab', "ünïcödé ✓ 𝄞", "back\\slash", ""]

    def event(i: int):
        if i % 7 == 3:
            return EdgeAdded(src=f"t{i}", dst=f"t{i + 1}", kind="same_topic", weight=0.5 + i / 1000)
        m = msg(i, content=texts[i % len(texts)] + f" {i}")
        return MessageAppended(role=m.role, content=m.content, message_id=m.message_id, token_estimate=m.token_estimate,
                               metadata={"note": texts[(i + 1) % len(texts)]} if i % 2 else {})

    def big_write(stream: str, first: int) -> Write:
        n = SMALL_COMMIT_ROWS + 20
        return Write(stream=stream, agent="a", events=tuple(
            NewEvent(event=event(i), ts_us=T0 + i, event_id=f"e{i}" if i % 3 else None, causation=i if i % 5 == 1 else None)
            for i in range(first, first + n)))

    writes = [big_write("d1", 0), big_write("d2", 1000), big_write("d1", 2000)]
    bulk, one_by_one = EventStore(tmp_path / "bulk.duckdb"), EventStore(tmp_path / "one.duckdb")
    try:
        bulk.append_many(writes)  # one unit: one commit of three writes
        for w in writes:
            for item in w.events:
                one_by_one.append_many([Write(stream=w.stream, agent=w.agent, events=(item,))])
        cols = "seq, stream, stream_version, type, schema_version, ts, agent, causation, event_id, payload"
        rows = bulk.query(f"SELECT {cols} FROM events ORDER BY seq")[1]
        assert len(rows) == 3 * (SMALL_COMMIT_ROWS + 20)
        assert rows == one_by_one.query(f"SELECT {cols} FROM events ORDER BY seq")[1]
        assert [r[-1] for r in rows] == [_encode(item.event).decode() for w in writes for item in w.events]
    finally:
        bulk.close()
        one_by_one.close()

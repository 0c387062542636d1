"""The runner reads the log a window of positions at a time, and still folds every event: across gaps that a
forget leaves in the log, up to a position, and up to a time. Python's collector is held off while a batch folds."""

import gc

import duckdb
import pytest
from tests.events.helpers import T0, write

from engram.config.home import ProjectionPaths
from engram.events.store import EventStore
from engram.projections.base import Projection, ProjectionContext
from engram.projections.registry import build_projections
from engram.projections.runner import ProjectionRunner


def _log_with_gaps(path):
    """Seqs 1-30 in d1, d2, d3 (ten each; seq i has ts T0 + (i - 1) s), then 4-19 erased (a gap longer than the runner's
    batch of 5) and 25."""
    store = EventStore(path)
    store.append_many([write("d1", range(0, 10)), write("d2", range(10, 20)), write("d3", range(20, 30))])
    store.close()
    con = duckdb.connect(str(path))
    con.execute("DELETE FROM events WHERE seq BETWEEN 4 AND 19 OR seq = 25")
    con.close()
    return EventStore(path)


def _replay(store, root, calls, **to):
    db = duckdb.connect(str(root / "p.duckdb"))

    def read(after, **kw):
        calls.append((after, kw["limit"], kw.get("to_seq")))
        return store.read(after, **kw)

    ctx = ProjectionContext(shard=0, paths=ProjectionPaths(root), db=db)
    runner = ProjectionRunner(build_projections(ctx), read, batch=5)
    try:
        events = runner.catch_up(**to)
        counts = dict(db.execute("SELECT discussion_id, messages FROM discussions").fetchall())
        return events, counts, runner.position
    finally:
        runner.close()
        db.close()


def test_every_event_is_folded_across_gaps_longer_than_a_batch(tmp_path):
    store = _log_with_gaps(tmp_path / "log.duckdb")
    calls = []
    try:
        events, counts, position = _replay(store, tmp_path, calls)
    finally:
        store.close()
    assert (events, counts, position) == (13, {"d1": 3, "d2": 1, "d3": 9}, 30)
    # Each read asks for one window of positions (seq > after, <= after + batch); only after an empty window does it
    # ask for whatever comes next (the gap 4-19 and the end of the log).
    windows = [(after, to) for after, _, to in calls if to is not None]
    assert all(to == after + 5 for after, to in windows)
    assert [after for after, _, to in calls if to is None] == [3, 30]


def test_a_replay_up_to_a_position_or_a_time_stops_there_across_a_gap(tmp_path):
    store = _log_with_gaps(tmp_path / "log.duckdb")
    try:
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        at_seq = _replay(store, tmp_path / "a", [], to_seq=23)
        at_time = _replay(store, tmp_path / "b", [], until_us=T0 + 26_000_000)  # seq 27
    finally:
        store.close()
    assert at_seq == (7, {"d1": 3, "d2": 1, "d3": 3}, 23)
    assert at_time == (10, {"d1": 3, "d2": 1, "d3": 6}, 27)


class Watcher(Projection):
    """Notes whether Python's cyclic collector was on while it folded, and while it was checkpointed."""

    name = "test-watcher"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.folding: set[bool] = set()
        self.checkpointing: set[bool] = set()

    def apply(self, rec):
        self.folding.add(gc.isenabled())

    def checkpoint(self):
        self.checkpointing.add(gc.isenabled())


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_while_a_batch_folds_and_as_it_was_after(tmp_path, enabled):
    store = _log_with_gaps(tmp_path / "log.duckdb")
    db = duckdb.connect(str(tmp_path / "p.duckdb"))
    watcher = Watcher(ProjectionContext(shard=0, paths=ProjectionPaths(tmp_path), db=db))
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        ProjectionRunner([watcher], store.read, batch=5).catch_up(checkpoint_every=5)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()
        db.close()
        store.close()
    assert watcher.folding == {False}
    assert watcher.checkpointing == {enabled}


class Uninterested(Watcher):
    """Folds only forgets; counts the batches it is given."""

    name = "test-uninterested"
    interests = frozenset({"DiscussionForgotten"})

    def apply_batch(self, batch):
        self.batches = getattr(self, "batches", 0) + 1
        super().apply_batch(batch)


def test_a_projection_wanting_none_of_a_batch_moves_past_it_without_folding(tmp_path):
    store = _log_with_gaps(tmp_path / "log.duckdb")
    db = duckdb.connect(str(tmp_path / "p.duckdb"))
    ctx = ProjectionContext(shard=0, paths=ProjectionPaths(tmp_path), db=db)
    uninterested, watcher = Uninterested(ctx), Watcher(ctx)
    try:
        ProjectionRunner([uninterested, watcher], store.read, batch=5).catch_up()
    finally:
        db.close()
        store.close()
    assert not hasattr(uninterested, "batches") and uninterested.folding == set()
    assert uninterested.position == watcher.position == 30
    assert watcher.folding == {False}


def test_the_discussion_index_counts_a_batch_as_it_counts_its_events_one_by_one(tmp_path):
    """`discussions` counts a batch's runs of messages a run at a time: the rows of folding the events one by one,
    with a forget in between, events out of time order, and two agents with a discussion of one name."""
    from engram.events.control import DiscussionForgotten
    from engram.events.envelope import Recorded
    from engram.projections.discussions import DiscussionIndex
    from tests.events.helpers import msg

    events = [Recorded(seq=s, stream=f"d{s % 3}", stream_version=s, agent=f"a{s % 2}", ts_us=T0 + (s * 7919) % 100,
                       event=msg(s)) for s in range(1, 30)]
    events.insert(15, Recorded(seq=15, stream="agent:a1", stream_version=1, agent="a1", ts_us=T0,
                               event=DiscussionForgotten(discussion_id="d1")))
    events = [Recorded(seq=i, stream=r.stream, stream_version=r.stream_version, agent=r.agent, ts_us=r.ts_us,
                       event=r.event) for i, r in enumerate(events, 1)]
    rows = []
    for name, batches in (("batch", [events]), ("alone", [[r] for r in events])):
        db = duckdb.connect(str(tmp_path / f"{name}.duckdb"))
        index = DiscussionIndex(ProjectionContext(shard=0, paths=ProjectionPaths(tmp_path / name), db=db))
        for b in batches:
            index.apply_batch(b)
        index.checkpoint()
        rows.append(db.execute("SELECT * FROM discussions ORDER BY agent, discussion_id").fetchall())
        db.close()
    assert rows[0] == rows[1]
    assert [(r[1], r[0], r[2]) for r in rows[0]] == [("a0", "d0", 4), ("a0", "d1", 5), ("a0", "d2", 5),
                                                     ("a1", "d0", 5), ("a1", "d1", 2), ("a1", "d2", 5)]

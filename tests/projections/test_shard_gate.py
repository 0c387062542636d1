"""A shard serves many threads at once; a forget (or a rebuild) reopens its DuckDB connections and has it alone."""

import threading
import time

import pytest
from tests.events.helpers import write

from engram.kernel.gate import Gate
from engram.shard.host import ShardHost


def test_a_forget_racing_appends_reads_sql_and_status_on_its_shard_fails_none_of_them(tmp_path):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live")
    errors: list[BaseException] = []
    stop = threading.Event()
    try:
        for i in range(3):
            host.append_many([write(f"d{i}", range(i * 10, i * 10 + 10), agent="a")])
        host.wait_projections(host.head())

        def hammer(call):
            n = 100
            while not stop.is_set():
                try:
                    call(n)
                except BaseException as exc:  # what a caller of the shard would have seen
                    errors.append(exc)
                    return
                n += 1

        calls = [
            lambda n: host.status(),
            lambda n: host.query("SELECT count(*) FROM discussions"),
            lambda n: host.append_many([write("live", range(n * 1000, n * 1000 + 1), agent="b")]),
            lambda n: host.wait_projections(host.head(), timeout=5),
            lambda n: host.read(0, limit=5),
            lambda n: host.sql("SELECT count(*) FROM events"),
        ]
        threads = [threading.Thread(target=hammer, args=(c,)) for c in calls]
        for t in threads:
            t.start()
        reports = [host.forget("a", f"d{i}") for i in range(2)]
        stop.set()
        for t in threads:
            t.join()
        assert errors == []
        assert [r["events_erased"] for r in reports] == [10, 10]
        host.wait_projections(host.head())
        assert sorted(d for (d,) in host.query("SELECT discussion_id FROM discussions")[1]) == ["d2", "live"]
        assert host.verify_replay() == []
    finally:
        stop.set()
        host.close()


def test_a_change_waits_for_the_calls_inside_and_holds_new_ones_until_it_is_done():
    gate, seen = Gate(), []
    inside = threading.Event()

    def call(name, hold=0.0):
        with gate.shared():
            inside.set()
            time.sleep(hold)
            seen.append(name)

    first = threading.Thread(target=call, args=("shared before", 0.3))
    first.start()
    inside.wait()

    def change():
        with gate.alone():
            with gate.shared():  # a change may use its object's shared methods
                seen.append("change")

    changer = threading.Thread(target=change)
    changer.start()
    while not gate._waiting_alone:  # the change is waiting now: a new call goes after it
        time.sleep(0.001)
    later = threading.Thread(target=call, args=("shared after",))
    later.start()
    for t in (first, changer, later):
        t.join(5)
    assert seen == ["shared before", "change", "shared after"]


def test_a_shared_call_that_asks_for_the_object_alone_is_refused_rather_than_waiting_forever():
    gate = Gate()
    with gate.shared(), gate.shared():
        with pytest.raises(RuntimeError, match="would wait on itself"):
            with gate.alone():
                pass
    with gate.alone(), gate.alone():  # nested changes in one thread
        pass

"""Nothing a fold cannot accept is acknowledged, and one bad write never fails the others."""

import threading
import time

import pytest

from engram.events.control import SettingsChanged
from engram.events.envelope import NewEvent, Write
from engram.events.messages import MessageAppended
from engram.events.store import AppendError, EventRejected, EventStore
from tests.events.helpers import T0, msg, write


@pytest.fixture
def store(tmp_path):
    s = EventStore(tmp_path / "log.duckdb")
    yield s
    s.close()


def _one(stream: str, event, ts_us: int = T0, agent: str = "a") -> Write:
    return Write(stream=stream, agent=agent, events=(NewEvent(event=event, ts_us=ts_us),))


def test_a_message_whose_name_is_a_number_is_refused_and_nothing_is_appended(store):
    poison = MessageAppended(role="user", content="hi", message_id="m1", token_estimate=1, name=123)
    with pytest.raises(EventRejected, match=r"MessageAppended: Expected `str \| null`, got `int` - at `\$.name`"):
        store.append_many([_one("d", poison)])
    assert store.head() == 0
    assert store.query("SELECT count(*) FROM events")[1] == [(0,)]


def test_an_event_time_thirty_thousand_years_ago_is_refused(store):
    with pytest.raises(EventRejected, match=r"event time -1000000000000000000 µs is outside 1900-01-01T00:00:00Z \.\. 2200"):
        store.append_many([_one("d", msg(1), ts_us=int(-1e12 * 1_000_000))])
    assert store.head() == 0


def test_settings_with_an_infinite_number_are_refused_not_recorded_as_null(store):
    settings = {"memory": {"decay": {"recencyHalfLifeHours": float("inf")}}}
    event = SettingsChanged(scope="agent", name="agent.config.json", settings=settings, content_hash="x")
    with pytest.raises(EventRejected, match=r"memory.decay.recencyHalfLifeHours is not a finite number"):
        store.append_many([_one("agent:a", event)])
    assert store.head() == 0


def test_settings_their_model_rejects_are_refused(store):
    event = SettingsChanged(scope="agent", name="agent.config.json", settings={"memroy": {}}, content_hash="x")
    with pytest.raises(EventRejected, match=r"unknown key 'memroy'; did you mean 'memory'\?"):
        store.append_many([_one("agent:a", event)])


def test_text_with_a_lone_surrogate_is_refused(store):
    with pytest.raises(EventRejected, match="not valid Unicode"):
        store.append_many([_one("d", msg(1, content="broken \ud800 text"))])
    assert store.head() == 0


def test_a_stream_named_for_another_agent_is_refused(store):
    with pytest.raises(EventRejected, match="another agent's stream"):
        store.append_many([_one("agent:b", msg(1), agent="a")])


def test_one_writer_with_an_absurd_timestamp_fails_alone_while_four_others_commit(store):
    failures = {"good": 0, "bad": 0}
    counted = threading.Lock()

    def writer(name: str, n: int, ts_us: int):
        for i in range(n):
            try:
                store.append_many([Write(stream=f"{name}", agent="a",
                                         events=(NewEvent(event=msg(i), ts_us=ts_us + i),))])
            except AppendError:
                with counted:
                    failures["good" if name.startswith("good") else "bad"] += 1

    threads = [threading.Thread(target=writer, args=(f"good{k}", 150, T0)) for k in range(4)]
    threads.append(threading.Thread(target=writer, args=("bad", 150, 10**26 * 1_000_000)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == {"good": 0, "bad": 150}
    assert store.head() == 600
    assert store.query("SELECT count(DISTINCT seq), min(seq), max(seq) FROM events")[1] == [(600, 1, 600)]


def test_a_write_that_breaks_the_group_transaction_is_refused_alone(store, monkeypatch):
    # A row the writer does not know about (as if written behind its back) makes the next write to
    # stream "x" violate UNIQUE (stream, stream_version) inside the database, after every check passed.
    store._con.execute(
        "INSERT INTO events VALUES (1000, 'x', 1, 'MessageAppended', 1, now(), 'a', NULL, NULL, now(), '{}')"
    )
    real_insert, groups = store._insert, []

    def slow_first_insert(segments):
        groups.append(len(segments))
        if len(groups) == 1:
            time.sleep(0.3)  # the others queue up behind this commit and form one group
        return real_insert(segments)

    monkeypatch.setattr(store, "_insert", slow_first_insert)
    outcome = {}

    def append(name: str, stream: str, ids: range):
        try:
            store.append_many([write(stream, ids)])
            outcome[name] = "ok"
        except AppendError as exc:
            outcome[name] = str(exc)

    first = threading.Thread(target=append, args=("first", "d0", range(0, 1)))
    first.start()
    time.sleep(0.1)
    rest = [threading.Thread(target=append, args=(n, s, r)) for n, s, r in
            [("good1", "d1", range(10, 12)), ("bad", "x", range(20, 21)), ("good2", "d2", range(30, 33))]]
    for t in rest:
        t.start()
    for t in [first, *rest]:
        t.join()
    assert groups[1] == 3  # the three writes were committed as one group first
    assert outcome["first"] == outcome["good1"] == outcome["good2"] == "ok"
    assert "commit failed" in outcome["bad"] and "Duplicate key" in outcome["bad"]
    assert store.query("SELECT stream, count(*) FROM events WHERE seq < 1000 GROUP BY stream ORDER BY stream")[1] == [
        ("d0", 1), ("d1", 2), ("d2", 3)]
    assert store.query("SELECT list(seq ORDER BY seq) FROM events WHERE seq < 1000")[1] == [([1, 2, 3, 4, 5, 6],)]

"""Properties over generated inputs (hypothesis): what the log acknowledges reads back exactly and folds; replay
from zero equals live after any sequence of operations; replay of a prefix equals what was live at that position;
handling a batch twice changes nothing; old schema versions read back through upcasters."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import ClassVar

import duckdb
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.events.base import Event
from engram.events.envelope import NewEvent, Write
from engram.events.store import AppendError, EventStore
from engram.events.upcasters import upcaster
from tests.reliability.strategies import events, timestamps

def cases(n: int) -> settings:
    return settings(max_examples=n, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def store():
    with tempfile.TemporaryDirectory() as tmp:
        s = EventStore(Path(tmp) / "log.duckdb")
        yield s
        s.close()


@cases(1200)
@given(event=st.one_of(events(), events(), events(), events(hostile=True)),  # a quarter hostile: NaN, lone surrogates
       ts_us=st.one_of(timestamps, timestamps, timestamps, st.integers(-(2**62), 2**62)))
def test_an_acknowledged_event_of_any_type_reads_back_exactly_and_a_refused_one_leaves_no_trace(store, event, ts_us):
    stream = f"s{store.head()}"
    head = store.head()
    try:
        [appended] = store.append_many([Write(stream=stream, agent="a", events=(NewEvent(event=event, ts_us=ts_us),))])
    except AppendError:
        assert store.head() == head and store.stream_version(stream) == 0
        return
    [rec] = store.read(appended.seqs[0] - 1, limit=1)
    assert rec.event == event and rec.ts_us == ts_us and rec.seq == head + 1


class Reading(Event, tag="TestReading"):
    """A test event at schema v3: v1 had `fahrenheit`, v2 renamed it `celsius` (converted), v3 added `unit`."""

    SCHEMA_VERSION: ClassVar[int] = 3
    celsius: float
    sensor: str
    unit: str = "C"


@upcaster("TestReading", 1)
def _reading_v1(payload: dict) -> dict:
    payload["celsius"] = (payload.pop("fahrenheit") - 32) * 5 / 9
    return payload


@upcaster("TestReading", 2)
def _reading_v2(payload: dict) -> dict:
    payload.setdefault("unit", "C")
    return payload


@cases(400)
@given(version=st.sampled_from([1, 2, 3]), value=st.floats(-1e6, 1e6, allow_nan=False), sensor=st.text(max_size=10))
def test_old_schema_versions_read_back_through_the_upcasters(store, version, value, sensor):
    payload = {"type": "TestReading", "sensor": sensor}
    if version == 1:
        payload["fahrenheit"] = value * 9 / 5 + 32
    else:
        payload["celsius"] = value
    seq = store.head() + 1
    # A row exactly as an engram of that schema version wrote it (the writer's own connection, like an old engram).
    store._con.execute(
        "INSERT INTO events VALUES (?, ?, 1, 'TestReading', ?, TIMESTAMPTZ '2024-01-01 00:00:00+00', 'a', NULL, NULL, now(), ?)",
        [seq, f"r{seq}", version, msgspec.json.encode(payload).decode()],
    )
    store._head = seq
    [rec] = store.read(seq - 1, limit=1)
    assert rec.event.sensor == sensor and rec.event.unit == "C"
    assert rec.event.celsius == pytest.approx(value, abs=1e-6)


from tests.reliability.sequences import SequenceRun, operations  # noqa: E402


@cases(25)
@given(ops=operations)
def test_after_any_sequence_of_operations_replay_equals_live_and_every_prefix_equals_what_was_live(ops):
    with tempfile.TemporaryDirectory() as tmp:
        outcome = SequenceRun(Path(tmp), groups=["summarizer", "auto-ingest", "working-memory"]).run(ops)
    assert outcome.replay_differences == []
    assert outcome.as_of_differences == []
    assert outcome.rehandled_appends == 0
    assert outcome.retry_added == 0

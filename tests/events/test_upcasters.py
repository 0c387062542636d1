"""Schema evolution: a stored v1 payload is read back as v2 through a registered upcaster."""

from typing import ClassVar

import duckdb
import pytest

from engram.events.base import Event
from engram.events.store import EventStore
from engram.events.upcasters import upcast, upcaster


class ThermostatSet(Event, tag="TestThermostatSet"):
    """v2 renamed `temp_f` (Fahrenheit) to `celsius` and added `room`."""

    SCHEMA_VERSION: ClassVar[int] = 2
    celsius: float
    room: str = "unknown"


@upcaster("TestThermostatSet", 1)
def _v1_to_v2(payload: dict) -> dict:
    payload["celsius"] = round((payload.pop("temp_f") - 32) * 5 / 9, 2)
    return payload


def test_a_v1_payload_in_the_log_is_read_back_as_v2(tmp_path):
    path = tmp_path / "log.duckdb"
    EventStore(path).close()
    # A row exactly as an engram of schema v1 wrote it.
    con = duckdb.connect(str(path))
    con.execute(
        "INSERT INTO events VALUES (1, 'house', 1, 'TestThermostatSet', 1, TIMESTAMPTZ '2024-01-01 00:00:00+00', "
        "'a', NULL, NULL, now(), ?)",
        ['{"type":"TestThermostatSet","temp_f":68.0}'],
    )
    con.close()
    store = EventStore(path)
    try:
        [rec] = store.read(0)
        assert rec.event == ThermostatSet(celsius=20.0, room="unknown")
        # New writes are stored as v2 and read back unchanged.
        store.append("house", [ThermostatSet(celsius=21.5, room="den")], agent="a")
        assert store.read(1)[0].event == ThermostatSet(celsius=21.5, room="den")
        assert store.query("SELECT schema_version FROM events ORDER BY seq")[1] == [(1,), (2,)]
    finally:
        store.close()


def test_a_missing_link_in_the_upcaster_chain_is_an_error():
    with pytest.raises(LookupError, match="no upcaster for TestThermostatSet from schema v2"):
        upcast("TestThermostatSet", {}, 2, 3)

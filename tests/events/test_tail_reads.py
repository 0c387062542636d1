"""Reads of the log's newest rows are answered from memory (`EventStore._tail`), exactly as DuckDB answers them."""

import itertools

import pytest
from tests.events.helpers import T0, msg, write

from engram.events import store as store_module
from engram.events.envelope import NewEvent, Write
from engram.events.store import EventStore


def _from_duckdb(store: EventStore, after: int, **filters) -> list[tuple]:
    """What `read_rows` returns with the tail out of the way (the query it would run)."""
    saved = store._tail
    store._tail = (store.head() + 10**9, [])
    try:
        return store.read_rows(after, **filters)
    finally:
        store._tail = saved


def _varied_writes(start: int) -> list[Write]:
    text = "naïve “quotes” \\ back\\slash \n newline 😀 {\"json\": [1, 2]}"
    return [
        write("d1", range(start, start + 3)),
        write("d2", range(start + 3, start + 5), agent="b", with_ids=False),
        Write("d1", "a", (NewEvent(msg(start + 5, content=text, role="assistant"), T0 + 7, "x" + str(start), causation=1),)),
    ]


FILTERS = [
    {}, {"limit": 2}, {"limit": None}, {"to_seq": 6}, {"stream": "d2"}, {"types": ["MessageAppended"]},
    {"types": ["TraceRetrieved"]}, {"agent": "b"}, {"since_us": T0 + 3_000_000}, {"until_us": T0 + 4_000_000},
    {"stream": "d1", "agent": "a", "limit": 1},
]


def test_tail_reads_return_what_duckdb_returns_for_every_filter(tmp_path):
    store = EventStore(tmp_path / "log.duckdb")
    try:
        for start in (0, 10, 20):
            store.append_many(_varied_writes(start))
        head = store.head()
        assert store._tail[0] == 1 and len(store._tail[1]) == head  # every row since the log opened is held
        for after, filters in itertools.product(range(0, head + 2), FILTERS):
            assert store.read_rows(after, **filters) == _from_duckdb(store, after, **filters), (after, filters)
        assert [r.seq for r in store.read(head - 2)] == [head - 1, head]
    finally:
        store.close()


def test_reads_before_the_tail_and_after_a_change_in_place_go_to_duckdb(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "TAIL_ROWS", 4)
    store = EventStore(tmp_path / "log.duckdb")
    try:
        for start in range(0, 60, 6):
            store.append_many(_varied_writes(start))
        first, rows = store._tail
        assert 4 <= len(rows) <= 8 and first + len(rows) - 1 == store.head()  # bounded, and ends at the head
        for after in range(0, store.head() + 1):
            assert store.read_rows(after) == _from_duckdb(store, after)
        erased = store.head()
        store.erase([erased])  # its payload changed in place: the tail lets go
        assert store.read_rows(erased - 1)[0][5] == "Purged"
        assert store.read_rows(erased - 1) == _from_duckdb(store, erased - 1)
    finally:
        store.close()


def test_a_bulk_commit_restarts_the_tail_after_it(tmp_path):
    store = EventStore(tmp_path / "log.duckdb")
    try:
        store.append_many([write("d1", range(0, 3))])
        store.append_many([write("bulk", range(100, 100 + store_module.SMALL_COMMIT_ROWS + 1))])
        assert store._tail == (store.head() + 1, [])
        store.append_many([write("d1", range(3, 5))])
        assert [r[0] for r in store._tail[1]] == [store.head() - 1, store.head()]
        for after in range(0, store.head() + 1):
            assert store.read_rows(after) == _from_duckdb(store, after)
    finally:
        store.close()


def test_a_reopened_log_reads_its_old_rows_from_duckdb(tmp_path):
    store = EventStore(tmp_path / "log.duckdb")
    store.append_many([write("d1", range(0, 3))])
    expected = store.read_rows(0)
    store.close()
    again = EventStore(tmp_path / "log.duckdb")
    try:
        assert again._tail == (4, [])
        assert again.read_rows(0) == expected
    finally:
        again.close()


class _ReadOnClear(dict):
    """The log's id cache, which `erase` and `remove_agents` clear right after their change is committed and before
    they return: a read made at that moment is what any reader could get then."""

    def __init__(self, store: EventStore, seen: list):
        super().__init__()
        self.store, self.seen = store, seen

    def clear(self) -> None:
        self.seen.append(self.store.read_rows(0))
        super().clear()


def test_no_read_after_an_erasure_or_a_removal_commits_finds_the_old_rows_in_memory(tmp_path):
    store = EventStore(tmp_path / "log.duckdb")
    try:
        store.append_many(_varied_writes(0))
        assert len(store._tail[1]) == store.head()  # every row held in memory
        seen: list = []
        store._ids = _ReadOnClear(store, seen)
        store.erase([1])
        erased = {r[0]: r for r in seen[-1]}[1]
        assert erased[5] == "Purged" and erased[7].startswith('{"type":"Purged"')  # the tombstone, not the message
        store.remove_agents(["b"])
        assert [r for r in seen[-1] if r[3] == "b"] == []  # b's rows are gone for every read after the delete
    finally:
        store.close()

"""The log's DuckDB settings that `bench/` measured (EventStore.__init__): kept, or a later change must measure again."""

from __future__ import annotations

from engram.events.store import CHECKPOINT_THRESHOLD, DUCKDB_THREADS, EventStore
from engram.memory.discussion import vectors


def test_a_writable_log_runs_duckdb_with_one_worker_and_its_checkpoint_threshold(tmp_path):
    store = EventStore(tmp_path / "log.duckdb")
    try:
        threads, threshold = store._con.execute(
            "SELECT current_setting('threads'), current_setting('checkpoint_threshold')").fetchone()
        assert threads == DUCKDB_THREADS == 1
        assert threshold == "64.0 MiB" and CHECKPOINT_THRESHOLD == "64MiB"
    finally:
        store.close()


def test_the_vector_store_writer_and_reader_run_duckdb_with_one_worker():
    for con in (vectors._writer_connection(), vectors._reader_connection()):
        assert con.execute("SELECT current_setting('threads')").fetchone()[0] == DUCKDB_THREADS

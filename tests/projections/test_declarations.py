"""Each projection table is its record's declaration (issue 26: one declaration per read model).

The tables are created as the projections create them, in a scratch DuckDB, and compared column by column (name and
type, in order) with what `engram.kernel.records` derives from the record. A column added, renamed or retyped in one
place and not the other fails here.
"""

from __future__ import annotations

import dataclasses

import duckdb
import pytest

from engram.events.cognitive import TraceEncoded
from engram.kernel import records
from engram.memory.cognitive.book import EVENT_ONLY, TRACE_FROM_EVENT, Change
from engram.memory.cognitive.graph import Edge
from engram.memory.cognitive.model import MemoryTrace
from engram.memory.cognitive.working_memory import FocusedSlot
from engram.memory.background.observation_log import NoteEntry
from engram.memory.discussion.lines import ChunkMemory, RollingSummary
from engram.memory.discussion.vectors import VectorMemoryRow
from engram.projections.discussion_files import DiscussionFiles
from engram.projections.observations import ObservationLogProjection
from engram.projections.traces import TraceProjection
from engram.projections.vector_memory import VectorMemory
from engram.projections.working_memory import WorkingMemoryProjection

AGENT = [("agent", "VARCHAR")]

DISCUSSION = [("discussion_id", "VARCHAR"), AGENT[0]]
LINE = [("line", "VARCHAR")]
# (projection, table, record, the columns the table has in front of the record's, and behind them)
DECLARED = [
    (TraceProjection, "memory_traces", MemoryTrace, [], []),
    (TraceProjection, "trace_edges", Edge, AGENT, []),
    (TraceProjection, "trace_changes", Change, AGENT, []),
    (WorkingMemoryProjection, "working_memory", FocusedSlot, [], []),
    (VectorMemory, "vector_memories", VectorMemoryRow, DISCUSSION, []),
    (DiscussionFiles, "discussion_memories", ChunkMemory, [*DISCUSSION, ("ordinal", "INTEGER")], LINE),
    (DiscussionFiles, "discussion_summaries", RollingSummary, DISCUSSION, LINE),
    (ObservationLogProjection, "observation_notes", NoteEntry, [("agent", "VARCHAR"), ("scope", "VARCHAR"),
                                                                 ("scope_id", "VARCHAR")], []),
]


def _created(projection: type) -> duckdb.DuckDBPyConnection:
    db = duckdb.connect()
    proj = object.__new__(projection)  # only `create`: no context, no fold
    proj.create(db)
    return db


def _described(db: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    return [(name, typ) for name, typ, *_ in db.execute(f"DESCRIBE {table}").fetchall()]


@pytest.mark.parametrize("projection, table, record, before, after", DECLARED, ids=[d[1] for d in DECLARED])
def test_every_projection_table_matches_its_declaration(projection, table, record, before, after):
    db = _created(projection)
    expected = duckdb.connect()
    expected.execute(records.ddl(table, record, before=before, after=after))
    assert _described(db, table) == _described(expected, table)


def test_a_trace_keeps_every_field_of_its_encoding_event_but_the_event_only_ones():
    trace_fields = {f.name for f in dataclasses.fields(MemoryTrace)}
    unmapped = [name for name in TraceEncoded.__struct_fields__
                if name not in EVENT_ONLY and TRACE_FROM_EVENT.get(name, name) not in trace_fields]
    assert unmapped == []


def test_the_trace_table_stores_where_a_replys_context_came_from():
    assert "context_message_ids" in records.column_names(MemoryTrace)


def test_a_select_list_naming_a_column_the_declaration_lacks_fails_when_it_is_built():
    with pytest.raises(ValueError, match="no column 'strength'"):
        records.columns(MemoryTrace, "trace_id", "strength")
    with pytest.raises(ValueError, match="reads none of its columns"):
        records.columns(MemoryTrace, "round(s0, 3) AS s0")
    assert records.columns(MemoryTrace, "trace_id", "round(encoding_strength, 3) AS s0") == \
        "trace_id, round(encoding_strength, 3) AS s0"


def test_a_trace_read_back_from_its_table_is_the_trace_that_was_written_with_its_context_provenance():
    """What `TraceProjection._restore` reads after an eviction or a restart: before the declaration, the table had
    no `context_message_ids`, and a recall answered after it showed no context provenance."""
    trace = MemoryTrace(
        trace_id="t1", agent="ann", stream="d1", scope="discussion", scope_id="d1", trace_type="episodic",
        content="I moved to Lisbon", entities=("Lisbon",), source_type="user_statement", source_seqs=(3, 4),
        source_message_ids=("m3",), confidence=0.9, valence=0.1, arousal=0.2, dominance=0.3, intensity=0.4,
        flashbulb=False, importance=0.7, encoding_strength=1.0, stability_s=86400.0, encoded_us=1_700_000_000_000_000,
        last_access_us=1_700_000_000_000_000, interval_s=3600.0, next_due_us=1_700_003_600_000_000, links={"t0", "t2"},
        deleted_us=None, last_seq=4, context="where do you live now?", context_message_ids=("m2",),
    )
    db = _created(TraceProjection)
    db.register("batch", records.arrow_table(MemoryTrace, [trace]))
    db.execute("INSERT INTO memory_traces SELECT * FROM batch")
    cursor = db.execute(f"SELECT {records.select_list(MemoryTrace)} FROM memory_traces")
    [back] = records.from_rows(MemoryTrace, [d[0] for d in cursor.description], cursor.fetchall())
    assert back == trace
    assert back.context_message_ids == ("m2",)


def test_a_traces_labels_are_stored_as_a_json_object_and_read_back_as_the_same_pairs():
    """`metadata` (`MemoryEdited`) is a JSON object in its VARCHAR column, keys sorted, NULL when there are none (as
    the table held it before the declaration), and a trace restored from the table has the labels it was written with."""
    base = dict(
        agent="ann", stream="d1", scope="discussion", scope_id="d1", trace_type="episodic", content="I moved to Lisbon",
        source_type="user_statement", source_seqs=(3,), source_message_ids=("m3",), confidence=0.9, valence=0.1,
        arousal=0.2, dominance=0.3, intensity=0.4, flashbulb=False, importance=0.7, encoding_strength=1.0,
        stability_s=86400.0, encoded_us=1_700_000_000_000_000, last_access_us=1_700_000_000_000_000, interval_s=3600.0,
        next_due_us=1_700_003_600_000_000,
    )
    labelled = MemoryTrace(trace_id="t1", **base, metadata=(("source", "user-fix"), ("topic", "home")))
    plain = MemoryTrace(trace_id="t2", **base)
    db = _created(TraceProjection)
    db.register("batch", records.arrow_table(MemoryTrace, [labelled, plain]))
    db.execute("INSERT INTO memory_traces SELECT * FROM batch")
    assert db.execute("SELECT trace_id, metadata FROM memory_traces ORDER BY trace_id").fetchall() == [
        ("t1", '{"source": "user-fix", "topic": "home"}'), ("t2", None)]
    cursor = db.execute(f"SELECT {records.select_list(MemoryTrace)} FROM memory_traces ORDER BY trace_id")
    back = records.from_rows(MemoryTrace, [d[0] for d in cursor.description], cursor.fetchall())
    assert [t.metadata for t in back] == [(("source", "user-fix"), ("topic", "home")), ()]
    assert back == [labelled, plain]


def test_a_chunk_memory_line_is_its_declaration_and_leaves_out_what_is_empty_as_the_files_always_did():
    import json

    import msgspec

    from engram.events.discussion import ChunkSummarized
    from engram.events.envelope import Recorded
    from engram.events.provenance import LlmCall
    from engram.memory.discussion.files import memory_line
    from engram.memory.discussion.lines import ChunkMemory, canonical

    ev = ChunkSummarized(generation=1, first_seq=3, last_seq=5, message_ids=("m3", "m4", "m5"), token_count=42,
                         summary="They planned the trip.", llm=LlmCall(provider="offline", model="offline-heuristic", task="summarize_chunk",
                                                   prompt_hash="h"),
                         memory_id="g1-m3-5", first_ts_us=1_700_000_000_000_000, last_ts_us=1_700_000_060_000_000,
                         trigger="messages")
    rec = Recorded(seq=7, stream="d1", stream_version=7, agent="ann", ts_us=1_700_000_120_000_000, event=ev)
    line = json.loads(canonical(memory_line(rec, ev)))
    assert list(line) == sorted(f for f in ChunkMemory.__struct_fields__ if f not in ("workflow", "workflow_error", "metadata"))
    assert line["llm"] == {"provider": "offline", "model": "offline-heuristic"}  # no error key
    assert (line["message_count"], line["first_message_id"], line["created_seq"]) == (3, "m3", 7)
    assert msgspec.convert(line, ChunkMemory) == memory_line(rec, ev)  # what the API answers with, read back


def test_the_vector_memory_table_keeps_its_constraints_and_a_row_reads_back_whole():
    """The declaration carries the table's narrow types and NOT NULLs (as the hand-written DDL had them), and a row
    written column by column reads back by name into the same record, vector and labels included."""
    import numpy as np
    import pyarrow as pa

    from engram.projections.vector_memory import TABLE_DDL

    assert "generation INTEGER NOT NULL, ordinal INTEGER NOT NULL, memory_id VARCHAR NOT NULL" in TABLE_DDL
    assert TABLE_DDL.endswith("embedding FLOAT[], metadata VARCHAR, PRIMARY KEY (agent, discussion_id, memory_id))")
    row = VectorMemoryRow(
        generation=2, ordinal=1, memory_id="m1", created_seq=9, created_ts_us=1_700_000_000_000_000, title="Lisbon",
        summary="Ana moved to Lisbon", entities=("Ana",), key_phrases=("moved",), topics=(), sentiment=None,
        first_seq=3, last_seq=4, message_ids=("a", "b"), token_count=12, first_ts_us=1_700_000_000_000_000,
        last_ts_us=1_700_000_001_000_000, mode="live", trigger="chunk", llm_provider="offline", llm_model="x",
        workflow=None, embedding_model="e", vector=np.array([0.5, -1.25], dtype=np.float32),
        metadata=(("team", "blue"),))
    db = duckdb.connect()
    db.execute(TABLE_DDL)
    table = records.arrow_table(VectorMemoryRow, [row], before=[("discussion_id", pa.string(), ["d1"]),
                                                                 ("agent", pa.string(), ["ann"])])
    db.register("t", table)
    db.execute("INSERT INTO vector_memories SELECT * FROM t")
    cur = db.execute(f"SELECT {records.select_list(VectorMemoryRow)} FROM vector_memories")
    [back] = records.from_rows(VectorMemoryRow, [c[0] for c in cur.description], cur.fetchall())
    assert back.vector.dtype == np.float32 and back.vector.tolist() == [0.5, -1.25]
    assert dataclasses.replace(back, vector=row.vector) == row


@pytest.mark.parametrize("module", ["traces", "working_memory", "vector_memory", "discussion_files", "observations"])
def test_no_declared_table_is_created_or_filled_by_hand_a_second_time(module):
    """A declared table's DDL and rows come from its record only: a hand-written CREATE TABLE or a positional
    INSERT ... VALUES for one of them in its projection's source is a second declaration."""
    import importlib
    import inspect

    import re

    source = inspect.getsource(importlib.import_module(f"engram.projections.{module}"))
    for _, table, *_ in DECLARED:
        assert not re.search(rf"CREATE TABLE (IF NOT EXISTS )?{table}\b", source)
        assert not re.search(rf"INSERT INTO {table} VALUES", source)


def test_an_arrow_batch_is_inserted_by_column_name_whatever_the_tables_column_order():
    """`records.insert_arrow`: the batch's columns go to the table's columns of the same name (never by position);
    `or_replace` replaces the row of the same key; an empty batch runs nothing; no view is left behind."""
    import pyarrow as pa

    db = duckdb.connect()
    db.execute("CREATE TABLE t (b VARCHAR, a BIGINT PRIMARY KEY)")
    records.insert_arrow(db, "t", pa.table({"a": [1, 2], "b": ["one", "two"]}))
    records.insert_arrow(db, "t", pa.table({"a": [2], "b": ["TWO"]}), or_replace=True)
    records.insert_arrow(db, "missing", pa.table({"a": pa.array([], pa.int64())}))  # nothing to insert: no query
    assert db.execute("SELECT a, b FROM t ORDER BY a").fetchall() == [(1, "one"), (2, "TWO")]
    assert db.execute("SELECT count(*) FROM duckdb_views() WHERE view_name LIKE '\\_%batch' ESCAPE '\\'").fetchone() == (0,)


@pytest.mark.parametrize("module", ["traces", "working_memory", "vector_memory", "discussion_files", "observations",
                                    "discussions", "compactions"])
def test_every_projection_inserts_its_arrow_rows_through_the_one_helper(module):
    """One Arrow insert (`engram.kernel.records.insert_arrow`): no projection inserts from a batch view of its own."""
    import importlib
    import inspect
    import re

    source = inspect.getsource(importlib.import_module(f"engram.projections.{module}"))
    assert not re.search(r"INSERT (OR REPLACE )?INTO [^\n]*SELECT [^\n]* FROM _", source)
    assert "records.insert_arrow(" in source


def test_the_vector_store_files_memories_table_is_the_declarations_columns_in_the_formats_order(tmp_path):
    """`<id>_vector_memory.db`'s `memories` table lays `VectorMemoryRow` out in the file format's own order: every
    column the record declares has the declaration's type there (and in the projection's `vector_memories`), and
    the three the file adds are computed from the message ids. A column renamed in the declaration fails at import."""
    from engram.memory.discussion import vectors

    con = duckdb.connect(str(tmp_path / "store.db"))
    for statement in vectors._DDL:
        con.execute(statement)
    in_file = {name: typ for name, typ, *_ in con.execute("DESCRIBE memories").fetchall()}
    declared = {f.column: f.sql for f in records.fields(VectorMemoryRow)}
    added = {"first_message_id", "last_message_id", "message_count"}
    assert set(in_file) - set(declared) == added
    for name, typ in in_file.items():
        if name not in added:
            assert typ == declared[name], name
    assert list(in_file) == list(vectors._MEMORY_SCHEMA.names)
    with pytest.raises(KeyError, match="no column 'titel'"):
        records.laid_out(VectorMemoryRow, ("memory_id", "titel"))


def test_an_arrow_table_holds_each_records_stored_values_cell_for_cell():
    """`arrow_table` builds its columns with getters derived once per record type (a checkpoint builds thousands of
    cells): its rows are exactly each record's `stored_values`, for scalars, NULLs, tuples, sets, JSON pairs and a
    flattened record's fields, in the declared column order."""
    import datetime

    from engram.events.background import ObservationNote

    EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

    base = dict(
        agent="ann", stream="d1", scope="discussion", scope_id="d1", trace_type="episodic", content="I moved to Lisbon",
        source_type="user_statement", source_seqs=(3, 4), source_message_ids=("m3",), confidence=0.9, valence=0.1,
        arousal=0.2, dominance=0.3, intensity=0.4, flashbulb=True, importance=0.7, encoding_strength=1.0,
        stability_s=86400.0, encoded_us=1_700_000_000_000_000, last_access_us=1_700_000_000_000_000, interval_s=3600.0,
        next_due_us=1_700_003_600_000_000,
    )
    traces = [MemoryTrace(trace_id="t1", **base, metadata=(("topic", "home"), ("source", "fix"))),
              MemoryTrace(trace_id="t2", **base, deleted_us=1_700_000_000_000_001, context="where?")]
    note = ObservationNote(note_id="n1", type="factual", text="Ann moved", importance=0.5, observed_us=5,
                           entities=("Ann",), source_seqs=(7,))
    entries = [NoteEntry(stream="d1", note=note, tokens=3, buffered=False, status="active", recorded_seq=9,
                         increment_last_seq=8),
               NoteEntry(stream="d2", note=note, tokens=4, buffered=True, status="buffered", recorded_seq=10,
                         increment_last_seq=9, activated_seq=11)]
    for record, items in ((MemoryTrace, traces), (NoteEntry, entries)):
        table = records.arrow_table(record, items)
        assert table.column_names == [f.column for f in records.fields(record)]
        expected = [records.stored_values(record, item) for item in items]
        got = table.to_pylist()
        for row in got:  # Arrow gives timestamps back as datetimes: compare them as microseconds
            for f in records.fields(record):
                if f.timestamp and row[f.column] is not None:
                    row[f.column] = (row[f.column] - EPOCH) // datetime.timedelta(microseconds=1)
        assert got == expected
    assert records.arrow_table(MemoryTrace, []).num_rows == 0

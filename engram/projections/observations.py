"""Observation logs in SQL and on disk (the fold of `engram.memory.background.observation_log`).

Tables:
- `observation_notes`: every note ever recorded, with its status (buffered, active, reflected,
  superseded), the seqs that recorded, activated and reflected it, and its provenance;
- `observation_logs`: one row per log (scope "discussion" or "agent"): messages and tokens observed,
  notes and their tokens, the observation compression, activations, reflections and their compression;
- `reflections`: one row per Reflected event (with the existing traces it restated, verified rather than
  stored again, and the notes that restated each, comma-separated); `reflection_traces`: the traces each
  one made.

Files: the log rendered as the guide shows it (`Date:` headings, bullet notes with nested details):
`agents/<agent>/Public/<discussion>_observations.md` for a discussion's log, `agents/<agent>/observations.md`
for an agent-wide one. Each file names the seq it reflects.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import duckdb
import pyarrow as pa

from engram.config.home import ProjectionPaths
from engram.events.background import Reflected
from engram.events.cognitive import TraceEncoded
from engram.events.envelope import Recorded
from engram.events.messages import MessageAppended
from engram.kernel import records
from engram.kernel.files import atomic_write
from engram.memory.background.observation_log import (
    LogKey,
    LogState,
    NoteEntry,
    ObservationLog,
    PROGRESS_INTERESTS,
    ReflectionEntry,
)
from engram.memory.background.render import ReflectionLine, render_log, restated_lines
from engram.projections.base import TableProjection

FILE_SUFFIX = "_observations.md"
AGENT_FILE = "observations.md"

_TS = pa.timestamp("us", tz="UTC")
_STRS = pa.list_(pa.string())
_INTS = pa.list_(pa.int64())
# The log's key in front of each row of a record's table.
_KEY = (("agent", pa.string()), ("scope", pa.string()), ("scope_id", pa.string()))
NOTE_SCHEMA = records.arrow_schema(NoteEntry, before=_KEY)  # observation_notes: `NoteEntry`, declared once
NOTES_DDL = records.ddl("observation_notes", NoteEntry, before=[(name, "VARCHAR") for name, _ in _KEY])
LOG_SCHEMA = pa.schema([
    ("agent", pa.string()), ("scope", pa.string()), ("scope_id", pa.string()), ("messages", pa.int64()),
    ("message_tokens", pa.int64()), ("increments", pa.int64()), ("notes", pa.int64()), ("note_tokens", pa.int64()),
    ("observation_compression", pa.float64()), ("active_notes", pa.int64()), ("active_tokens", pa.int64()),
    ("buffered_notes", pa.int64()), ("reflected_notes", pa.int64()), ("activations", pa.int64()),
    ("reflections", pa.int64()), ("reflection_input_tokens", pa.int64()), ("reflection_output_tokens", pa.int64()),
    ("reflection_compression", pa.float64()), ("last_seq", pa.int64()), ("file", pa.string()),
    # How far the log is from activation (engram.memory.background.observation_log.Progress).
    ("unobserved_tokens", pa.int64()), ("observer_threshold", pa.int64()), ("tokens_to_observer", pa.int64()),
    ("reflector_threshold", pa.int64()), ("tokens_to_reflector", pa.int64()),
    ("conversation_tokens", pa.int64()), ("joined_tokens", pa.int64()),
])
REFLECTION_SCHEMA = pa.schema([
    ("agent", pa.string()), ("scope", pa.string()), ("scope_id", pa.string()), ("seq", pa.int64()), ("ts", _TS),
    ("stream", pa.string()), ("consumed", pa.int64()), ("input_tokens", pa.int64()), ("output_tokens", pa.int64()),
    ("trace_ids", _STRS), ("restated_trace_ids", _STRS), ("restated_note_ids", _STRS),
])
REFLECTION_TRACE_SCHEMA = pa.schema([
    ("agent", pa.string()), ("scope", pa.string()), ("scope_id", pa.string()), ("reflected_seq", pa.int64()),
    ("trace_id", pa.string()), ("trace_type", pa.string()), ("content", pa.string()), ("note_ids", _STRS),
    ("first_observed", _TS),
])
_SQL_TYPES = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
              _TS: "TIMESTAMPTZ", _STRS: "VARCHAR[]", _INTS: "BIGINT[]"}
_TABLES = {"observation_notes": NOTE_SCHEMA, "observation_logs": LOG_SCHEMA, "reflections": REFLECTION_SCHEMA,
           "reflection_traces": REFLECTION_TRACE_SCHEMA}
# What the Observer runs with, per agent (so a restart maps new messages to the right log).
SETTINGS_SCHEMA = pa.schema([
    ("agent", pa.string()), ("enabled", pa.bool_()), ("scope", pa.string()), ("observer_threshold", pa.int64()),
    ("reflector_threshold", pa.int64()),
])


def _insert(db: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    schema = _TABLES.get(table) or SETTINGS_SCHEMA
    records.insert_arrow(db, table, pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(zip(*rows), schema)],
                                                  schema=schema))


def _insert_notes(db: duckdb.DuckDBPyConnection, notes: list[tuple[LogKey, NoteEntry]]) -> None:
    if notes:
        keys = list(zip(*(key for key, _ in notes)))
        records.insert_arrow(db, "observation_notes", records.arrow_table(
            NoteEntry, [n for _, n in notes], before=[(name, typ, values) for (name, typ), values in zip(_KEY, keys)]))


def log_file(paths: ProjectionPaths, key: LogKey):
    agent, scope, scope_id = key
    if scope == "discussion":
        return paths.discussion_file(agent, scope_id, FILE_SUFFIX)
    return paths.agent_dir(agent) / AGENT_FILE


class ObservationLogProjection(TableProjection):
    name = "observations"
    # 2: reflections.restated_trace_ids; 3: reflections.restated_note_ids; 4: how far each log is from activation
    # (observation_logs.unobserved_tokens ... tokens_to_reflector; messages and settings are folded too);
    # 5: observation_notes is `NoteEntry`'s table (the same columns, the note's in the event's order); 6: a note of an
    # edited or removed message is superseded (`superseded_by`)
    version = 6
    tables: ClassVar[tuple[str, ...]] = tuple(_TABLES) + ("observation_settings",)
    interests = PROGRESS_INTERESTS | {"TraceEncoded"}

    def create(self, db: duckdb.DuckDBPyConnection) -> None:
        db.execute(NOTES_DDL)
        for table, schema in {**_TABLES, "observation_settings": SETTINGS_SCHEMA}.items():
            if table != "observation_notes":
                cols = ", ".join(f"{f.name} {_SQL_TYPES[f.type]}" for f in schema)
                db.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols})")
        self._settings_dirty = False
        self.book = ObservationLog()
        # Reflection traces by log: trace id -> (reflected seq, note ids); their content arrives with TraceEncoded.
        self.wanted: dict[str, tuple[LogKey, int, tuple[str, ...]]] = {}
        self.traces: dict[LogKey, dict[str, ReflectionLine]] = {}
        self.trace_seq: dict[str, tuple[int, tuple[str, ...]]] = {}
        self._dirty: set[LogKey] = set()
        self._gone: set[LogKey] = set()
        self._as_of: dict[LogKey, int] = {}

    # ------------------------------------------------------------------ folding

    def apply_batch(self, batch: list[Recorded]) -> None:
        """Runs of messages, most of a log, are folded a run at a time (`ObservationLog.messages`), each changed log
        touched once per run; every other event one by one, in its place."""
        self.apply_in_runs(batch, MessageAppended, self._messages)

    def _messages(self, run: list[Recorded]) -> None:
        for key, seq in self.book.messages(run).items():
            self._touch(key, seq)

    def apply(self, rec: Recorded) -> None:
        e = rec.event
        if isinstance(e, MessageAppended):
            # Most of the log: a message changes only its log's progress (no note, reflection or trace).
            key = self.book.message(rec)
            if key is not None:
                self._touch(key, rec.seq)
            return
        if isinstance(e, TraceEncoded):
            want = self.wanted.pop(e.trace_id, None)
            if want is not None:
                key, seq, note_ids = want
                st = self.book.logs.get(key)
                if st is not None:
                    first = min((st.notes[n].note.observed_us for n in note_ids if n in st.notes), default=rec.ts_us)
                    self.traces.setdefault(key, {})[e.trace_id] = ReflectionLine(
                        e.trace_id, e.trace_type, e.content, first, len(note_ids))
                    self.trace_seq[e.trace_id] = (seq, note_ids)
                    self._touch(key, rec.seq)
            return
        changed = self.book.apply(rec)
        if rec.type == "SettingsChanged" and rec.stream.startswith("agent:"):
            self._settings_dirty = True
        if isinstance(e, Reflected):
            key = (rec.agent, e.scope, e.scope_id or rec.stream)
            notes = e.trace_note_ids or tuple(() for _ in e.trace_ids)
            for tid, note_ids in zip(e.trace_ids, notes):
                self.wanted[tid] = (key, rec.seq, tuple(note_ids))
        for key in changed:
            if key in self.book.logs:
                # Forgetting a discussion drops the reflections made from it, in an agent-wide log too.
                reflected = {t for r in self.book.logs[key].reflections for t in r.trace_ids}
                self.traces[key] = {t: line for t, line in self.traces.get(key, {}).items() if t in reflected}
                self._touch(key, rec.seq)
            else:
                self.traces.pop(key, None)
                self._as_of.pop(key, None)
                self._dirty.discard(key)
                self._gone.add(key)

    def _touch(self, key: LogKey, seq: int) -> None:
        self._dirty.add(key)
        self._gone.discard(key)
        self._as_of[key] = seq

    # ------------------------------------------------------------------ writing

    def flush(self, db: duckdb.DuckDBPyConnection) -> None:
        if getattr(self, "_settings_dirty", False):
            db.execute("DELETE FROM observation_settings")
            _insert(db, "observation_settings", [(a, *v) for a, v in sorted(self.book.observing.items())])
            self._settings_dirty = False
        changed = sorted(self._dirty | self._gone)
        if changed:
            # One DELETE per table for every changed log (a statement per log and table was most of a replay's
            # checkpoint: every discussion's log changes with its messages).
            agents, scopes, scope_ids = zip(*changed)
            db.register("_observation_keys", pa.table({"agent": pa.array(agents, pa.string()), "scope": pa.array(scopes, pa.string()), "scope_id": pa.array(scope_ids, pa.string())}))
            try:
                for table in _TABLES:
                    db.execute(f"DELETE FROM {table} USING _observation_keys k WHERE {table}.agent = k.agent "
                               f"AND {table}.scope = k.scope AND {table}.scope_id = k.scope_id")
            finally:
                db.unregister("_observation_keys")
        for key in sorted(self._gone):
            path = log_file(self.ctx.paths, key)
            if path.exists():
                path.unlink()
        notes: list[tuple[LogKey, NoteEntry]] = []
        logs: list[tuple[Any, ...]] = []
        reflections: list[tuple[Any, ...]] = []
        traces: list[tuple[Any, ...]] = []
        for key in sorted(self._dirty):
            st = self.book.logs[key]
            notes += [(key, n) for n in st.notes.values()]
            path = log_file(self.ctx.paths, key)
            logs.append(_log_row(st, str(path.relative_to(self.ctx.paths.root))))
            lines = self.traces.get(key, {})
            for r in st.reflections:
                reflections.append((*key, r.seq, r.ts_us, r.stream, r.consumed, r.input_tokens, r.output_tokens,
                                    list(r.trace_ids), list(r.duplicates),
                                    [",".join(ids) for ids in r.duplicate_note_ids]))
                for tid in r.trace_ids:
                    line = lines.get(tid)
                    if line is not None:
                        traces.append((*key, r.seq, tid, line.trace_type, line.content,
                                       list(self.trace_seq.get(tid, (0, ()))[1]), line.first_observed_us))
            if not (st.notes or st.reflections):
                continue  # nothing observed yet: the row says how far the log is from activation, no file yet
            ordered = [_marked(lines[t], st, self.trace_seq.get(t, (0, ()))[1])
                       for r in st.reflections for t in r.trace_ids if t in lines]
            ordered += restated_lines(st)
            atomic_write(path, render_log(st, ordered, as_of_seq=self._as_of.get(key, st.last_seq)).encode())
        _insert_notes(db, notes)
        _insert(db, "observation_logs", logs)
        _insert(db, "reflections", reflections)
        _insert(db, "reflection_traces", traces)
        self._dirty.clear()
        self._gone.clear()

    # ------------------------------------------------------------------ restart

    def load(self, db: duckdb.DuckDBPyConnection) -> None:
        """After a restart: the logs, their notes and reflections back from the tables."""
        for row in db.execute(
            "SELECT agent, enabled, scope, observer_threshold, reflector_threshold FROM observation_settings"
        ).fetchall():
            self.book.observing[row[0]] = tuple(row[1:])
        for row in db.execute(
            "SELECT agent, scope, scope_id, messages, message_tokens, increments, activations, last_seq, "
            "conversation_tokens, joined_tokens, observer_threshold, reflector_threshold FROM observation_logs"
        ).fetchall():
            st = self.book.log(tuple(row[:3]))
            st.messages, st.message_tokens, st.increments, st.activations, st.last_seq = row[3:8]
            st.conversation_tokens, st.joined_tokens, st.observer_threshold, st.reflector_threshold = row[8:]
            self._as_of[st.key] = st.last_seq
        cursor = db.execute(f"SELECT agent, scope, scope_id, {records.select_list(NoteEntry)} FROM observation_notes "
                            "ORDER BY recorded_seq, note_id")
        rows = cursor.fetchall()
        for key, entry in zip((tuple(r[:3]) for r in rows),
                              records.from_rows(NoteEntry, [c[0] for c in cursor.description], rows)):
            self.book.log(key).notes[entry.note.note_id] = entry
        for agent, scope, scope_id, seq, ts_us, stream, consumed, inp, out, tids, restated, by in db.execute(
            "SELECT agent, scope, scope_id, seq, epoch_us(ts), stream, consumed, input_tokens, output_tokens, trace_ids, "
            "restated_trace_ids, restated_note_ids FROM reflections ORDER BY seq"
        ).fetchall():
            self.book.log((agent, scope, scope_id)).reflections.append(
                ReflectionEntry(seq, ts_us, stream, tuple(tids), consumed, inp, out, tuple(restated),
                                tuple(tuple(ids.split(",")) for ids in by)))
        for agent, scope, scope_id, seq, tid, kind, content, note_ids, first in db.execute(
            "SELECT agent, scope, scope_id, reflected_seq, trace_id, trace_type, content, note_ids, epoch_us(first_observed) "
            "FROM reflection_traces ORDER BY reflected_seq, trace_id"
        ).fetchall():
            self.traces.setdefault((agent, scope, scope_id), {})[tid] = ReflectionLine(tid, kind, content, first, len(note_ids))
            self.trace_seq[tid] = (seq, tuple(note_ids))
        for key, st in self.book.logs.items():
            for r in st.reflections:
                for tid in r.trace_ids:
                    if tid not in self.traces.get(key, {}):
                        self.wanted[tid] = (key, r.seq, ())  # its TraceEncoded was not folded before the restart


def _marked(line: ReflectionLine, st: LogState, note_ids: tuple[str, ...]) -> ReflectionLine:
    """A reflection condensed from a note of a message edited or removed since is shown superseded (the trace book
    supersedes the trace itself: its source messages are the notes'.)"""
    label = next((st.notes[n].superseded_by for n in note_ids if n in st.notes and st.notes[n].superseded_by), "")
    return dataclasses.replace(line, superseded_by=label) if label else line


def _log_row(st: LogState, file: str) -> tuple:
    inp = sum(r.input_tokens for r in st.reflections)
    out = sum(r.output_tokens for r in st.reflections)
    active = st.active()
    return (
        st.agent, st.scope, st.scope_id, st.messages, st.message_tokens, st.increments, len(st.notes),
        st.recorded_note_tokens(), st.compression(), len(active), sum(n.tokens for n in active),
        len(st.with_status("buffered")), len(st.with_status("reflected")) + len(st.with_status("superseded")),
        st.activations, len(st.reflections), inp, out, round(inp / out, 3) if out else None, st.last_seq, file,
        *_progress(st),
    )


def _progress(st: LogState) -> tuple:
    p = st.progress()
    return (p.unobserved_tokens, p.observer_threshold, p.tokens_to_observer, p.reflector_threshold,
            p.tokens_to_reflector, st.conversation_tokens, st.joined_tokens)

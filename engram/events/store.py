"""The event log of one shard: a DuckDB table, one writer, group commit.

`EventStore` is a plain class (no Ray). Callers on many threads call `append`/`append_many`;
whoever finds no commit in progress becomes the leader and commits everything queued so far
as one Arrow batch in one transaction (group commit). Every caller is acknowledged only after
the commit that holds its events. Under load batches grow by themselves; when idle each
append commits at once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import duckdb
import pyarrow as pa

from engram.events import codec
from engram.events.base import Event
from engram.events.envelope import Appended, NewEvent, Recorded, Write

SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq            BIGINT      NOT NULL,
    stream         VARCHAR     NOT NULL,
    stream_version BIGINT      NOT NULL,
    type           VARCHAR     NOT NULL,
    schema_version INTEGER     NOT NULL,
    ts             TIMESTAMPTZ NOT NULL,
    agent          VARCHAR     NOT NULL,
    causation      BIGINT,
    event_id       VARCHAR,
    recorded_at    TIMESTAMPTZ NOT NULL,
    payload        JSON        NOT NULL,
    UNIQUE (stream, stream_version),
    UNIQUE (stream, event_id)
);
"""

_ARROW_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("stream", pa.string()),
        ("stream_version", pa.int64()),
        ("type", pa.string()),
        ("schema_version", pa.int32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("agent", pa.string()),
        ("causation", pa.int64()),
        ("event_id", pa.string()),
        ("recorded_at", pa.timestamp("us", tz="UTC")),
        ("payload", pa.string()),
    ]
)

_SELECT = (
    "SELECT seq, stream, stream_version, agent, epoch_us(ts), type, schema_version, payload, causation, event_id "
    "FROM events"
)


class AppendError(Exception):
    """An append that was refused; nothing of its call was written."""


class ConcurrencyConflict(AppendError):
    def __init__(self, stream: str, expected: int, actual: int):
        super().__init__(
            f"stream {stream!r}: expected version {expected}, but the stream is at version {actual}"
        )
        self.stream, self.expected, self.actual = stream, expected, actual

    def __reduce__(self):  # so the error crosses process boundaries (Ray) intact
        return (type(self), (self.stream, self.expected, self.actual))


class StreamOwnershipError(AppendError):
    pass


class PayloadTooLarge(AppendError):
    pass


class _Pending:
    """One caller's writes, committed all or nothing, and the caller's wake-up state."""

    __slots__ = ("writes", "results", "error", "done")

    def __init__(self, writes: Sequence[Write]):
        self.writes = writes
        self.results: list[Appended] | None = None
        self.error: BaseException | None = None
        self.done = False


class EventStore:
    """One shard's log. Thread-safe; the only process that opens `path` for writing."""

    def __init__(
        self,
        path: str | Path,
        *,
        shard: int = 0,
        read_only: bool = False,
        max_batch_events: int = 20_000,
        max_payload_bytes: int = 1 << 20,
        clock: Callable[[], float] = time.time,
    ):
        self.path = str(path)
        self.shard = shard
        self.max_batch_events = max_batch_events
        self.max_payload_bytes = max_payload_bytes
        self._clock = clock
        self.read_only = read_only
        if self.path != ":memory:" and not read_only:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._con = duckdb.connect(self.path, read_only=read_only)
        if not read_only:
            self._con.execute(SCHEMA)
        # Readers get their own cursors, made from this one under a lock: a DuckDB connection
        # must not be used by two threads at once, and the writer's is busy during commits.
        self._reader_base = self._con.cursor()
        self._reader_lock = threading.Lock()
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._committing = False
        self._closed = False
        row = self._con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
        self._head: int = row[0]
        # stream -> (version, agent); kept by the writer so that checks need no query.
        self._streams: dict[str, tuple[int, str]] = {
            s: (v, a)
            for s, v, a in self._con.execute(
                "SELECT stream, max(stream_version), any_value(agent) FROM events GROUP BY stream"
            ).fetchall()
        }
        # stream -> {event_id: seq}, loaded lazily for streams that get writes with ids.
        self._ids: dict[str, dict[str, int]] = {}

    # ------------------------------------------------------------------ writing

    def append(
        self,
        stream: str,
        events: Sequence[Event | NewEvent],
        *,
        agent: str,
        ts_us: int | None = None,
        expected_version: int | None = None,
    ) -> Appended:
        """Append `events` to `stream` atomically; returns their seqs once committed."""
        now = ts_us if ts_us is not None else int(self._clock() * 1_000_000)
        items = tuple(e if isinstance(e, NewEvent) else NewEvent(event=e, ts_us=now) for e in events)
        return self.append_many([Write(stream=stream, agent=agent, events=items, expected_version=expected_version)])[0]

    def append_many(self, writes: Sequence[Write]) -> list[Appended]:
        """Append several writes as one unit: all are committed, or none and an AppendError is raised."""
        if self._closed:
            raise AppendError("the event store is closed")
        if self.read_only:
            raise AppendError(f"{self.path} is open read-only")
        pending = _Pending(writes)
        with self._cond:
            self._queue.append(pending)
            while not pending.done:
                if self._committing:
                    self._cond.wait()
                    continue
                self._committing = True
                batch = self._take_batch()
                self._cond.release()
                try:
                    self._commit(batch)
                finally:
                    self._cond.acquire()
                    self._committing = False
                    self._cond.notify_all()
        if pending.error is not None:
            raise pending.error
        assert pending.results is not None
        return pending.results

    def _take_batch(self) -> list[_Pending]:
        taken, count = [], 0
        while self._queue:
            size = sum(len(w.events) for w in self._queue[0].writes)
            if taken and count + size > self.max_batch_events:
                break
            taken.append(self._queue.pop(0))
            count += size
        return taken

    def _commit(self, batch: list[_Pending]) -> None:
        """Validate each pending unit, then insert all valid ones in one transaction."""
        self._load_ids(batch)
        rows: list[tuple] = []
        staged: list[tuple[_Pending, list[Appended], dict, dict]] = []
        seq = self._head
        streams_overlay: dict[str, tuple[int, str]] = {}
        ids_overlay: dict[tuple[str, str], int] = {}
        recorded_at = int(self._clock() * 1_000_000)
        for pending in batch:
            try:
                results, unit_rows, s_over, i_over, seq_after = self._stage(
                    pending.writes, seq, streams_overlay, ids_overlay, recorded_at
                )
            except AppendError as exc:
                pending.error = exc
                pending.done = True
                continue
            seq = seq_after
            rows.extend(unit_rows)
            streams_overlay.update(s_over)
            ids_overlay.update(i_over)
            staged.append((pending, results, s_over, i_over))
        if rows:
            try:
                self._insert(rows)
            except Exception as exc:  # an unexpected database error fails the whole group
                for pending, *_ in staged:
                    pending.error = AppendError(f"commit failed: {exc}")
                    pending.done = True
                return
        self._head = seq
        self._streams.update(streams_overlay)
        for (stream, event_id), s in ids_overlay.items():
            self._ids.setdefault(stream, {})[event_id] = s
        for pending, results, *_ in staged:
            pending.results = results
            pending.done = True

    def _stage(self, writes, seq, streams_overlay, ids_overlay, recorded_at):
        """Rows and results for one unit, checked against the log and the batch so far."""
        s_over: dict[str, tuple[int, str]] = {}
        i_over: dict[tuple[str, str], int] = {}
        rows, results = [], []
        for write in writes:
            version, owner = s_over.get(write.stream) or streams_overlay.get(write.stream) or self._streams.get(
                write.stream, (0, write.agent)
            )
            if owner != write.agent:
                raise StreamOwnershipError(
                    f"stream {write.stream!r} belongs to agent {owner!r}, not {write.agent!r}"
                )
            known = self._ids.get(write.stream, {})
            seqs, fresh, dups = [], [], 0
            for item in write.events:
                if item.event_id is not None:
                    key = (write.stream, item.event_id)
                    original = i_over.get(key) or ids_overlay.get(key) or known.get(item.event_id)
                    if original is not None:
                        seqs.append(original)
                        dups += 1
                        continue
                seq += 1
                fresh.append((seq, item))
                seqs.append(seq)
                if item.event_id is not None:
                    i_over[(write.stream, item.event_id)] = seq
            if fresh and write.expected_version is not None and write.expected_version != version:
                raise ConcurrencyConflict(write.stream, write.expected_version, version)
            for s, item in fresh:
                version += 1
                payload = codec.encode(item.event)
                if len(payload) > self.max_payload_bytes:
                    raise PayloadTooLarge(
                        f"{item.event.tag()} for stream {write.stream!r} is {len(payload)} bytes; "
                        f"the limit is {self.max_payload_bytes}"
                    )
                rows.append(
                    (
                        s,
                        write.stream,
                        version,
                        item.event.tag(),
                        item.event.SCHEMA_VERSION,
                        item.ts_us,
                        write.agent,
                        item.causation,
                        item.event_id,
                        recorded_at,
                        payload,
                    )
                )
            s_over[write.stream] = (version, owner)
            results.append(Appended(stream=write.stream, seqs=tuple(seqs), stream_version=version, duplicates=dups))
        return results, rows, s_over, i_over, seq

    def _insert(self, rows: list[tuple]) -> None:
        columns = list(zip(*rows))
        table = pa.Table.from_arrays(
            [pa.array(col, type=field.type) for col, field in zip(columns, _ARROW_SCHEMA)], schema=_ARROW_SCHEMA
        )
        con = self._con
        con.execute("BEGIN TRANSACTION")
        try:
            con.register("_batch", table)
            con.execute("INSERT INTO events SELECT * FROM _batch")
            con.unregister("_batch")
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise

    def _load_ids(self, batch: list[_Pending]) -> None:
        """Bring in the recorded event ids of existing streams that this batch writes with ids."""
        wanted = {
            w.stream
            for p in batch
            for w in p.writes
            if w.stream not in self._ids and w.stream in self._streams and any(e.event_id for e in w.events)
        }
        if not wanted:
            return
        for stream in wanted:
            self._ids[stream] = {}
        for stream, event_id, seq in self._con.execute(
            "SELECT stream, event_id, seq FROM events WHERE event_id IS NOT NULL AND stream IN (SELECT unnest(?))",
            [sorted(wanted)],
        ).fetchall():
            self._ids[stream][event_id] = seq

    # ------------------------------------------------------------------ reading

    def head(self) -> int:
        """The seq of the last committed event (0 for an empty log)."""
        return self._head

    def wait(self, seq: int, timeout: float | None = None) -> bool:
        """Block until the log holds `seq` (read-your-writes); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._head < seq:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining if remaining is not None else 0.05)
        return True

    def stream_version(self, stream: str) -> int:
        return self._streams.get(stream, (0, ""))[0]

    def streams(self) -> dict[str, tuple[int, str]]:
        """Every stream with its (version, agent)."""
        return dict(self._streams)

    def read(
        self,
        after: int = 0,
        *,
        limit: int | None = 10_000,
        to_seq: int | None = None,
        stream: str | None = None,
        types: Iterable[str] | None = None,
        agent: str | None = None,
        since_us: int | None = None,
        until_us: int | None = None,
    ) -> list[Recorded]:
        """Events with seq > `after` in seq order, filtered by position, stream, type, agent and time."""
        where, args = ["seq > ?"], [after]
        if to_seq is not None:
            where.append("seq <= ?")
            args.append(to_seq)
        if stream is not None:
            where.append("stream = ?")
            args.append(stream)
        if types is not None:
            where.append("type IN (SELECT unnest(?))")
            args.append(list(types))
        if agent is not None:
            where.append("agent = ?")
            args.append(agent)
        if since_us is not None:
            where.append("epoch_us(ts) >= ?")
            args.append(since_us)
        if until_us is not None:
            where.append("epoch_us(ts) <= ?")
            args.append(until_us)
        sql = f"{_SELECT} WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        cur = self._cursor()
        try:
            rows = cur.execute(sql, args).fetchall()
        finally:
            cur.close()
        return [self._record(r) for r in rows]

    def iter_events(self, after: int = 0, *, to_seq: int | None = None, batch: int = 50_000, **filters) -> Iterator[Recorded]:
        """All matching events after `after`, read in batches."""
        position = after
        while True:
            chunk = self.read(position, limit=batch, to_seq=to_seq, **filters)
            if not chunk:
                return
            yield from chunk
            position = chunk[-1].seq

    def read_stream(self, stream: str, from_version: int = 1) -> list[Recorded]:
        cur = self._cursor()
        try:
            rows = cur.execute(
                f"{_SELECT} WHERE stream = ? AND stream_version >= ? ORDER BY stream_version", [stream, from_version]
            ).fetchall()
        finally:
            cur.close()
        return [self._record(r) for r in rows]

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._reader_lock:
            return self._reader_base.cursor()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection of its own to this shard's database instance (for co-hosted projections)."""
        return self._cursor()

    def detach(self, alias: str) -> None:
        with self._reader_lock:
            self._reader_base.execute(f"DETACH {alias}")

    def attach(self, path: str | Path, alias: str) -> None:
        """Attach another database file to this instance, so SQL can join it with the log."""
        quoted = str(path).replace("'", "''")
        with self._reader_lock:
            self._reader_base.execute(f"ATTACH '{quoted}' AS {alias}")

    def _record(self, row: tuple) -> Recorded:
        seq, stream, version, agent, ts_us, type_, schema_version, payload, causation, event_id = row
        return Recorded(
            seq=seq,
            stream=stream,
            stream_version=version,
            agent=agent,
            ts_us=ts_us,
            event=codec.decode(type_, schema_version, payload),
            causation=causation,
            event_id=event_id,
            shard=self.shard,
        )

    def query(self, sql: str, params: Sequence | None = None) -> tuple[list[str], list[tuple]]:
        """Run read-only SQL on this shard's connection; returns column names and rows."""
        cur = self._cursor()
        try:
            res = cur.execute(sql, params or [])
            names = [d[0] for d in res.description] if res.description else []
            return names, res.fetchall()
        finally:
            cur.close()

    # ------------------------------------------------------------------ erasure

    def purge_streams(self, streams: Sequence[str]) -> int:
        """Replace the payloads of every event of `streams` with a `Purged` tombstone.

        Positions stay gap-free; the content is gone from the table. `compact_file` then
        rewrites the database file so the old bytes are not left on disk.
        """
        from engram.events.control import Purged  # local: control imports nothing from here

        with self._cond:
            while self._committing:
                self._cond.wait()
            self._committing = True
        try:
            con = self._con
            types = con.execute(
                "SELECT DISTINCT type FROM events WHERE stream IN (SELECT unnest(?)) AND type <> 'Purged'",
                [list(streams)],
            ).fetchall()
            changed = 0
            con.execute("BEGIN TRANSACTION")
            for (t,) in types:
                payload = codec.encode(Purged(original_type=t))
                res = con.execute(
                    "UPDATE events SET type = 'Purged', schema_version = 1, payload = ?, event_id = NULL "
                    "WHERE stream IN (SELECT unnest(?)) AND type = ?",
                    [payload, list(streams), t],
                ).fetchall()
                changed += res[0][0] if res else 0
            con.execute("COMMIT")
            for s in streams:
                self._ids.pop(s, None)
            return changed
        finally:
            with self._cond:
                self._committing = False
                self._cond.notify_all()

    def checkpoint(self) -> None:
        self._con.execute("CHECKPOINT")

    def close(self) -> None:
        if self._closed:
            return
        with self._cond:
            while self._committing:
                self._cond.wait()
            self._closed = True
        try:
            if not self.read_only:
                self._con.execute("CHECKPOINT")
        finally:
            self._reader_base.close()
            self._con.close()

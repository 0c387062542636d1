"""The event log of one shard: a DuckDB table, one writer, group commit.

`EventStore` is a plain class (no Ray). Callers on many threads call `append`/`append_many`;
whoever finds no commit in progress becomes the leader and commits everything queued so far
as one Arrow batch in one transaction (group commit). Every caller is acknowledged only after
the commit that holds its events. Under load batches grow by themselves; when idle each
append commits at once.
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import duckdb
import msgspec
import pyarrow as pa

from engram.events import codec
from engram.events.base import Event
from engram.events.control import FORGET_MARKERS, Unreadable
from engram.events.envelope import Appended, NewEvent, Recorded, Write
from engram.events.erasure import plan
from engram.events.validation import InvalidEvent, check_event, check_events, check_write

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
    UNIQUE (agent, stream, stream_version)
);
CREATE TABLE IF NOT EXISTS log_schema (version INTEGER NOT NULL);
"""
# The log's shape. 1: `UNIQUE (stream, stream_version)` (a discussion id was one namespace for the whole home);
# 2: a stream is (agent, stream), so two agents may each have a discussion `my-trip`. `_migrate` brings an older
# log to this version when it is opened for writing (one transaction; a log already at it is left alone).
LOG_SCHEMA_VERSION = 2
# Idempotency on event_id is enforced by the single writer before commit (ids of a stream are
# loaded from the log when the stream is first written with ids), not by a second unique index:
# that index would halve the insert rate for no extra safety with one writer per file.

log = logging.getLogger(__name__)

_SELECT = (
    "SELECT seq, stream, stream_version, agent, epoch_us(ts), type, schema_version, payload, causation, event_id "
    "FROM events"
)


# How long a commit leader waits for other writers when appends are contended. A DuckDB
# commit costs milliseconds, so a sub-millisecond wait that fills the batch pays for itself.
GROUP_COMMIT_LINGER_S = 0.0005
# The WAL size at which DuckDB folds the WAL into the log file (its default: 16 MiB); see EventStore.__init__.
CHECKPOINT_THRESHOLD = "64MiB"

class AppendError(Exception):
    """An append that was refused; nothing of its call was written."""


class ConcurrencyConflict(AppendError):
    def __init__(self, stream: str, expected: int, actual: int):
        super().__init__(
            f"stream {stream!r}: expected version {expected}, but the stream is at version {actual}"
        )
        self.stream, self.expected, self.actual = stream, expected, actual

    def __reduce__(self) -> tuple[type, tuple[str, int, int]]:  # so the error crosses process boundaries (Ray) intact
        return (type(self), (self.stream, self.expected, self.actual))


class StreamOwnershipError(AppendError):
    """No longer raised: a stream is (agent, stream), so no agent's write can find another agent's stream. Kept so
    that callers catching it still import."""


class PayloadTooLarge(AppendError):
    pass


class EventRejected(AppendError):
    """An event that its folds could not accept (see `engram.events.validation`); nothing of the call was written."""


class EventIdConflict(AppendError):
    """An event id already recorded for another event (`Event.identity` differs): an id names one event, so the
    repeat is refused rather than dropped as a duplicate; nothing of the call was written."""

    def __init__(self, message: str, stream: str = "", event_id: str = "", seq: int = 0):
        super().__init__(message)
        self.stream, self.event_id, self.seq = stream, event_id, seq

    def __reduce__(self) -> tuple[type, tuple[str, str, str, int]]:  # crosses process boundaries (Ray) intact
        return (type(self), (str(self), self.stream, self.event_id, self.seq))


_json_encoder = msgspec.json.Encoder()


def _encode(event: Event) -> bytes:
    return _json_encoder.encode(event)


def _encode_all(events: list[Event]) -> list[bytes]:
    """The JSON payloads of `events`, each the bytes `_encode` gives it: encoded as JSON lines in one call, then split
    at the line ends (the encoder escapes every newline inside a string, so each line is one event's payload)."""
    if len(events) == 1:
        return [_json_encoder.encode(events[0])]
    return _json_encoder.encode_lines(events).split(b"\n")[:-1]


def _encode_checked(event: Event) -> bytes:
    """The event's JSON payload, once it is known that every fold of its type accepts it."""
    try:
        payload = _encode(event)
    except UnicodeEncodeError:
        raise InvalidEvent(f"{event.tag()}: a text field is not valid Unicode (a lone surrogate)") from None
    except (TypeError, OverflowError, msgspec.EncodeError) as exc:
        raise InvalidEvent(f"{event.tag()}: {exc}") from None
    check_event(event, payload)
    return payload


_PREPARED_SCHEMA = pa.schema(
    [
        ("stream", pa.string()),
        ("type", pa.string()),
        ("schema_version", pa.int32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("agent", pa.string()),
        ("causation", pa.int64()),
        ("event_id", pa.string()),
        ("payload", pa.string()),
    ]
)


_TS = _PREPARED_SCHEMA.field("ts").type

# Up to this many rows a commit goes in as one multi-row VALUES insert; above it as an Arrow
# batch. Measured here: 7 rows take ~2.5 ms via VALUES and ~3.7 ms via Arrow; bulk Arrow
# inserts run at ~230k rows/s. Writes this large are turned into Arrow by their caller's thread.
SMALL_COMMIT_ROWS = 64
# The log's newest rows, kept in memory as `read_rows` returns them (`EventStore._tail`): nearly every read of a live
# log is of its tail (each policy actor's long poll, the projections' fold), and a DuckDB query for it cost some
# 2-4 ms of CPU, many times per recall or chat turn (issue 27). At most twice this many rows are kept.
TAIL_ROWS = 2048


_VALUES_ROW = "(?, ?, ?, ?, ?, make_timestamptz(?::BIGINT), ?, ?::BIGINT, ?, now(), ?)"


class _Prepared:
    """A write encoded by its caller's thread (payloads, and Arrow columns for large writes), so
    that the committing leader only assigns positions while callers' encoding overlaps its time
    in DuckDB."""

    __slots__ = ("write", "event_ids", "id_set", "tags", "tag", "schemas", "payloads", "_table")

    def __init__(self, write: Write, max_payload_bytes: int):
        self.write = write
        events = write.events
        try:
            check_write(write)
            evs = [item.event for item in events]
            try:
                payloads = _encode_all(evs)
            except Exception:  # one does not encode: event by event, to report the first event at fault
                payloads = [_encode_checked(event) for event in evs]
            check_events(evs, payloads)
        except InvalidEvent as exc:
            raise EventRejected(f"stream {write.stream!r}: {exc}") from None
        for item, payload in zip(events, payloads):
            if len(payload) > max_payload_bytes:
                raise PayloadTooLarge(
                    f"{item.event.tag()} for stream {write.stream!r} is {len(payload)} bytes; "
                    f"the limit is {max_payload_bytes}"
                )
        classes = [type(event) for event in evs]
        self.event_ids = [item.event_id for item in events]
        ids = set(self.event_ids)
        self.id_set: set[str | None] | None = None if ids == {None} or not ids else ids  # None: no event ids
        one = set(classes)
        if len(one) == 1:  # the one type of the write's events: its tag and version for each
            cls = one.pop()
            tag: str = cls.__struct_config__.tag  # type: ignore[assignment]  # str tags: events.base
            self.tag: str | None = tag
            self.tags: list[str] = [tag] * len(classes)
            self.schemas = [cls.SCHEMA_VERSION] * len(classes)
        else:
            self.tag = None
            self.tags = [c.__struct_config__.tag for c in classes]  # type: ignore[misc]
            self.schemas = [c.SCHEMA_VERSION for c in classes]
        self.payloads = payloads
        self._table = None
        if len(events) > SMALL_COMMIT_ROWS:
            self.table()

    def table(self) -> pa.Table:
        if self._table is None:
            write, events, n = self.write, self.write.events, len(self.write.events)
            causes = [item.causation for item in events]
            self._table = pa.Table.from_arrays(
                [
                    pa.array([write.stream] * n, pa.string()),
                    pa.array(self.tags, pa.string()),
                    # Numbers from C arrays (no Arrow conversion, which gives up the GIL: see `_insert`).
                    pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(array("i", self.schemas))]),
                    pa.Array.from_buffers(_TS, n, [None, pa.py_buffer(array("q", [item.ts_us for item in events]))]),
                    pa.array([write.agent] * n, pa.string()),
                    pa.nulls(n, pa.int64()) if causes.count(None) == n else pa.array(causes, pa.int64()),
                    pa.array(self.event_ids, pa.string()),
                    # JSON bytes from msgspec are valid UTF-8: the same buffers read as text (a view: no compute
                    # kernel, which would give up the GIL and wait to win it back from the other writers).
                    pa.array(self.payloads, pa.binary()).view(pa.string()),
                ],
                schema=_PREPARED_SCHEMA,
            )
        return self._table

    def rows(self, fresh: Sequence[int], first_seq: int, first_version: int) -> list[tuple[Any, ...]]:
        w, events = self.write, self.write.events
        return [
            (first_seq + k, w.stream, first_version + k, self.tags[i], self.schemas[i], events[i].ts_us, w.agent,
             events[i].causation, self.event_ids[i], self.payloads[i].decode())
            for k, i in enumerate(fresh)
        ]

    def arrow(self, fresh: Sequence[int]) -> pa.Table:
        """The columns of the events at `fresh` (positions and versions are added for the whole commit)."""
        return self.table() if len(fresh) == len(self.event_ids) else self.table().take(list(fresh))


class _Pending:
    """One caller's writes, committed all or nothing, and the caller's wake-up state."""

    __slots__ = ("writes", "prepared", "results", "error", "done")

    def __init__(self, writes: Sequence[Write], max_payload_bytes: int):
        self.writes = writes
        self.prepared = [_Prepared(w, max_payload_bytes) for w in writes]
        self.results: list[Appended] | None = None
        self.error: BaseException | None = None
        self.done = False


# One write's events that a commit appends: (the write, the indices of its events not recorded before, the seq of the
# first of them, its stream version).
_Segment = tuple[_Prepared, "list[int] | range", int, int]


def _batch_event(seq: int, *segment_lists: list[_Segment]) -> Event:
    """The event at `seq` among the segments of a commit being staged (an event id repeated within one batch)."""
    for segments in segment_lists:
        for prep, fresh, first, _ in segments:
            if first <= seq < first + len(fresh):
                return prep.write.events[fresh[seq - first]].event
    raise KeyError(seq)


# DuckDB worker threads of a writable log's instance (see `EventStore.__init__`).
DUCKDB_THREADS = 1


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
    ):
        self.path = str(path)
        self.shard = shard
        self.max_batch_events = max_batch_events
        self.max_payload_bytes = max_payload_bytes
        self.read_only = read_only
        if self.path != ":memory:" and not read_only:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._con = duckdb.connect(self.path, read_only=read_only)
        if not read_only:
            # DuckDB checkpoints the WAL into the file once it passes 16 MiB by default, stalling the commit that
            # crossed it 100-800 ms: a bulk append spent a quarter of its time there. 64 MiB: bulk appends +15-25%
            # (bench/append.py, interleaved), a WAL that still replays in about a second when a crash left one.
            self._con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_THRESHOLD}'")
            # One DuckDB worker thread for the log and the projections attached to it (DuckDB's default: one per core).
            # Their statements are small appends, reads of the log's tail and checkpoints of a few rows per agent,
            # issued from several threads of the shard's own; DuckDB's extra workers bought no speed there and kept
            # memory of their own: `bench/scale.py --agents 100,1000 --no-cluster`, the shard's peak at 1,000 agents
            # 464-512 MB against 588-649 (three runs each, alternated), messages/s 85-89 against 78-83; replay
            # (`bench/replay.py`) 273-278k events/s against 270k, bulk append 163-169k against 161k.
            self._con.execute(f"SET threads = {DUCKDB_THREADS}")
            _migrate(self._con)
        # Readers get their own cursors, made from this one under a lock: a DuckDB connection
        # must not be used by two threads at once, and the writer's is busy during commits.
        self._reader_base = self._con.cursor()
        self._reader_lock = threading.Lock()
        self._cond = threading.Condition()
        self._nudges = 0  # `nudge` calls: a reader lingering in `wait_for` for types it reads stops lingering
        self._queue: list[_Pending] = []
        self._committing = False
        self._contended = False
        self._closed = False
        self._head: int = self._con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]
        # (the seq of its first row, rows): every row committed from that seq on, in order, as `read_rows` returns
        # them; only appended to by the commit leader, before the head moves, and replaced, never cut, in place (a
        # reader takes the pair and reads the rows it holds). Starts empty; a bulk commit, an erasure, an import or a
        # removal empties it again (reads before its first row go to DuckDB).
        self._tail: tuple[int, list[tuple[Any, ...]]] = (self._head + 1, [])
        # The last seq of each event type appended since the log was opened, set before the head moves past it
        # (`wait_for`); events through `_untyped_through` (those found at open, imported, or after a removal) are of
        # types not tracked here.
        self._last_of_type: dict[str, int] = {}
        self._untyped_through: int = self._head
        # (agent, stream) -> version; kept by the writer so that checks need no query. A stream is named by its
        # agent and its id together: two agents' discussions `my-trip` are two streams.
        self._streams: dict[tuple[str, str], int] = {
            (a, s): v
            for a, s, v in self._con.execute(
                "SELECT agent, stream, max(stream_version) FROM events GROUP BY agent, stream"
            ).fetchall()
        }
        # (agent, stream) -> {event_id: seq}, loaded lazily for streams that get writes with ids.
        self._ids: dict[tuple[str, str], dict[str, int]] = {}

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
        now = ts_us if ts_us is not None else int(time.time() * 1_000_000)
        items = tuple(e if isinstance(e, NewEvent) else NewEvent(event=e, ts_us=now) for e in events)
        return self.append_many([Write(stream=stream, agent=agent, events=items, expected_version=expected_version)])[0]

    def append_many(self, writes: Sequence[Write]) -> list[Appended]:
        """Append several writes as one unit: all are committed, or none and an AppendError is raised."""
        if self._closed:
            raise AppendError("the event store is closed")
        if self.read_only:
            raise AppendError(f"{self.path} is open read-only")
        pending = _Pending(writes, self.max_payload_bytes)  # encoded here, outside the commit
        with self._cond:
            self._queue.append(pending)
            while not pending.done:
                if self._committing:
                    self._cond.wait()
                    continue
                self._committing = True
                if self._contended and len(self._queue) < self.max_batch_events:
                    # Writers were waiting at the last commit: give them a moment to join this
                    # one. Without it the first thread back commits alone, every time.
                    self._cond.wait(GROUP_COMMIT_LINGER_S)
                batch = self._take_batch()
                self._contended = len(batch) > 1 or bool(self._queue)
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
        taken: list[_Pending] = []
        count = 0
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
        segments: list[_Segment] = []
        staged: list[tuple[_Pending, list[Appended]]] = []
        seq = self._head
        streams_overlay: dict[tuple[str, str], int] = {}
        ids_overlay: dict[tuple[str, str], dict[str, int]] = {}  # (agent, stream) -> {event id: seq} of this batch
        identities = self._recorded_identities(batch)  # seq -> identity, of the log's events that the batch repeats
        for pending in batch:
            try:
                results, unit_segments, s_over, i_over, seq_after = self._stage(
                    pending.prepared, seq, streams_overlay, ids_overlay, identities, segments
                )
            except AppendError as exc:
                pending.error = exc
                pending.done = True
                continue
            seq = seq_after
            segments.extend(unit_segments)
            streams_overlay.update(s_over)
            for named, ids in i_over.items():
                ids_overlay.setdefault(named, {}).update(ids)
            staged.append((pending, results))
        if segments:
            try:
                inserted = self._insert(segments)
            except Exception as exc:
                if len(staged) == 1:
                    pending = staged[0][0]
                    pending.error = AppendError(f"commit failed: {exc}")
                    pending.done = True
                    return
                # One write broke the group's transaction (nothing of the group was written): commit the
                # callers one by one, so that only the one at fault is refused and the others go in.
                for pending, _ in staged:
                    self._commit([pending])
                return
            self._extend_tail(inserted, seq)
        last = self._last_of_type
        for prep, fresh, first, _ in segments:  # before the head moves: a waiter that sees the head sees the types
            if prep.tag is not None:  # one type: its last event's position
                last[prep.tag] = first + len(fresh) - 1
            else:  # in order, so that the last of each type stands
                last.update(zip([prep.tags[i] for i in fresh], range(first, first + len(fresh))))
        self._head = seq
        self._streams.update(streams_overlay)
        for named, ids in ids_overlay.items():
            self._ids.setdefault(named, {}).update(ids)
        for pending, results in staged:
            pending.results = results
            pending.done = True

    def _extend_tail(self, inserted: list[tuple[Any, ...]] | None, head: int) -> None:
        """The rows a commit inserted (through `head`) join the tail; a bulk commit's (None) start it afresh after them."""
        first, rows = self._tail
        if not inserted or inserted[0][0] != first + len(rows):
            self._tail = (head + 1, [])
            return
        # (seq, stream, stream_version, type, schema_version, ts_us, agent, causation, event_id, payload) -> _SELECT's
        new = [(r[0], r[1], r[2], r[6], r[5], r[3], r[4], r[9], r[7], r[8]) for r in inserted]
        if len(rows) + len(new) > 2 * TAIL_ROWS:  # a new list: a reader holding the old one reads on in it
            kept = (rows + new)[-TAIL_ROWS:]
            self._tail = (kept[0][0], kept)
        else:
            rows.extend(new)

    def _reset_tail(self) -> None:
        """Rows changed in place or removed (an erasure, a removal) or came otherwise (an import): reads go to DuckDB
        until new commits fill the tail again."""
        self._tail = (self._head + 1, [])

    def _stage(self, prepared: list[_Prepared], seq: int, streams_overlay: dict[tuple[str, str], int],
               ids_overlay: dict[tuple[str, str], dict[str, int]], identities: dict[int, tuple[Any, ...]],
               accepted: list[_Segment]) -> Any:
        """Positions for one unit, checked against the log and the batch so far (`accepted`: the segments of the
        batch's units staged before this one)."""
        s_over: dict[tuple[str, str], int] = {}
        i_over: dict[tuple[str, str], dict[str, int]] = {}
        results: list[Appended] = []
        segments: list[_Segment] = []
        for prep in prepared:
            write = prep.write
            stream, agent = write.stream, write.agent
            named = (agent, stream)
            version = s_over.get(named) or streams_overlay.get(named) or self._streams.get(named, 0)
            known = self._ids.get(named, {})
            mine_ids = i_over.get(named)
            batch_ids = ids_overlay.get(named)
            n = len(prep.event_ids)
            if prep.id_set is None:  # no event ids: every event is new
                fresh: list[int] | range = range(n)
                seqs: list[int] | range = range(seq + 1, seq + n + 1)
                seq += n
            elif (len(prep.id_set) == n and None not in prep.id_set and known.keys().isdisjoint(prep.id_set)
                  and (mine_ids is None or mine_ids.keys().isdisjoint(prep.id_set))
                  and (batch_ids is None or batch_ids.keys().isdisjoint(prep.id_set))):
                # ids, each new and none twice in the write (an import, a bulk append): all new, in one step
                fresh = range(n)
                seqs = range(seq + 1, seq + n + 1)
                i_over.setdefault(named, {}).update(zip(prep.event_ids, seqs))  # type: ignore[arg-type]  # no None
                seq += n
            else:
                seqs, fresh = [], []  # fresh: indices of events not recorded before
                unit_ids = i_over.setdefault(named, {})
                for i, event_id in enumerate(prep.event_ids):
                    if event_id is not None:
                        original = unit_ids.get(event_id) or (batch_ids or {}).get(event_id) or known.get(event_id)
                        event = write.events[i].event
                        if original is not None:
                            mine = event.identity()
                            if original <= self._head:
                                theirs = identities.get(original)
                            elif original > seq - len(fresh):  # an event of this write
                                theirs = write.events[fresh[original - seq + len(fresh) - 1]].event.identity()
                            else:
                                theirs = _batch_event(original, accepted, segments).identity()
                            if mine is not None and theirs is not None and mine != theirs:
                                raise EventIdConflict(
                                    f"{event.id_label(event_id)} of {stream!r} is already recorded (seq {original}) "
                                    "with other content: an id names one event; send it again unchanged, or the new "
                                    "one under an id of its own", stream, event_id, original)
                            seqs.append(original)
                            continue
                        unit_ids[event_id] = seq + 1
                    seq += 1
                    fresh.append(i)
                    seqs.append(seq)
            if fresh and write.expected_version is not None and write.expected_version != version:
                raise ConcurrencyConflict(stream, write.expected_version, version)
            if fresh:
                k = len(fresh)
                segments.append((prep, fresh, seq - k + 1, version + 1))
                version += k
            s_over[named] = version
            dups = len(seqs) - len(fresh)
            results.append(Appended(stream=stream, seqs=tuple(seqs), stream_version=version, duplicates=dups))
        return results, segments, s_over, i_over, seq

    def _recorded_identities(self, batch: list[_Pending]) -> dict[int, tuple[Any, ...]]:
        """seq -> `Event.identity` of the recorded events that this batch's events repeat by event id, for the types
        that compare repeats: one query per commit that has such repeats (a re-sent message, a re-ingested file)."""
        seqs = []
        for pending in batch:
            for prep in pending.prepared:
                known = self._ids.get((prep.write.agent, prep.write.stream))
                if not known or prep.id_set is None or known.keys().isdisjoint(prep.id_set):
                    continue
                for item, event_id in zip(prep.write.events, prep.event_ids):
                    if event_id is not None and event_id in known and item.event.identity() is not None:
                        seqs.append(known[event_id])
        if not seqs:
            return {}
        rows = self._con.execute(
            "SELECT seq, type, schema_version, payload FROM events WHERE seq IN (SELECT unnest(?))", [seqs]
        ).fetchall()
        found: dict[int, tuple[Any, ...]] = {}
        for seq, type_, schema_version, payload in rows:
            try:
                identity = codec.decode(type_, schema_version, payload).identity()
            except Exception:  # a row that does not decode (see decode_rows): nothing to compare with
                continue
            if identity is not None:
                found[seq] = identity
        return found

    def _insert(self, segments: list[_Segment]) -> list[tuple[Any, ...]] | None:
        """One transaction: a VALUES insert for a small commit, an Arrow batch for a large one. Returns the rows of
        a small commit as inserted (positions, columns in the table's order but `recorded_at`), None for a large one.

        recorded_at is the commit's wall-clock time (DuckDB's now()): informational (lag,
        audits), never used by a projection.
        """
        con = self._con
        total = sum(len(fresh) for _, fresh, _, _ in segments)
        try:
            if total <= SMALL_COMMIT_ROWS:
                rows = [r for prep, fresh, s0, v0 in segments for r in prep.rows(fresh, s0, v0)]
                values = ", ".join([_VALUES_ROW] * len(rows))
                # One statement in autocommit mode is its own transaction (all rows or none, one now()): one call
                # into DuckDB instead of three (BEGIN, INSERT, COMMIT). Each call gives up the GIL and wins it back,
                # and a recall load commits a few TraceRetrieved this way some twenty-five times a second.
                con.execute(f"INSERT INTO events VALUES {values}", [x for row in rows for x in row])
                return rows
            else:
                # One call for the whole transaction, the batch found by name in this frame (DuckDB's replacement
                # scan of Python objects) instead of registered and unregistered: each call into DuckDB gives up the
                # GIL and must win it back from the writers encoding their next writes (a millisecond or more
                # each under 8 writers; five calls a commit were a tenth of bulk append's time).
                # Positions and stream versions as two columns for the whole commit, from C arrays: one Arrow
                # conversion each, not two per write (a conversion gives up the GIL, and the leader waits to win it
                # back while every other writer waits for the leader).
                seqs, versions = array("q"), array("q")
                for _, fresh, s0, v0 in segments:
                    seqs.extend(range(s0, s0 + len(fresh)))
                    versions.extend(range(v0, v0 + len(fresh)))
                _engram_append_batch = pa.concat_tables([prep.arrow(fresh) for prep, fresh, _, _ in segments])
                _engram_append_batch = _engram_append_batch.append_column(
                    "seq", pa.Array.from_buffers(pa.int64(), total, [None, pa.py_buffer(seqs)])
                ).append_column("stream_version", pa.Array.from_buffers(pa.int64(), total, [None, pa.py_buffer(versions)]))
                con.execute(
                    "BEGIN TRANSACTION; "
                    "INSERT INTO events SELECT seq, stream, stream_version, type, schema_version, ts, agent, causation, "
                    "event_id, now(), payload FROM _engram_append_batch; "
                    "COMMIT"
                )
                del _engram_append_batch
                return None
        except Exception:
            try:  # a failed COMMIT (e.g. a full disk) has rolled back already; the first error is the one to report
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass
            raise

    def _load_ids(self, batch: list[_Pending]) -> None:
        """Bring in the recorded event ids of existing streams that this batch writes with ids."""
        wanted = {
            (w.agent, w.stream)
            for p in batch
            for w in p.writes
            if (w.agent, w.stream) not in self._ids and (w.agent, w.stream) in self._streams
            and any(e.event_id for e in w.events)
        }
        if not wanted:
            return
        for key in wanted:
            self._ids[key] = {}
        for agent, stream, event_id, seq in self._con.execute(
            "SELECT agent, stream, event_id, seq FROM events WHERE event_id IS NOT NULL "
            "AND stream IN (SELECT unnest(?)) AND agent IN (SELECT unnest(?))",
            [sorted({s for _, s in wanted}), sorted({a for a, _ in wanted})],
        ).fetchall():
            ids = self._ids.get((agent, stream))
            if ids is not None:
                ids[event_id] = seq

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

    def wait_for(self, seq: int, types: Sequence[str] | None, timeout: float | None = None,
                 linger: float = 0.0, prompt: Sequence[str] | None = None) -> tuple[bool, int]:
        """Block until the log holds `seq` (or `timeout`); then (whether an event of one of `types` may be among those
        from `seq` on, the head). False with a head at or past `seq` means none is: a reader of only those types may
        move past that head without reading (a policy actor woken by events it never reads). `types` None: any.
        `linger`: when only events of other types came, wait up to that much longer (within `timeout`) for one of
        `types`, so that a reader of a few types wakes a few times a second at most, not at every append of others
        (a recall's TraceRetrieved wakes only the policies that read it). `prompt` (a part of `types`; None: all of
        them): only these end the wait at once; the other types of `types` end it after `linger`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self.wait(seq, timeout):
            return False, self._head
        woke = time.monotonic()
        with self._cond:
            nudges = self._nudges
            while True:
                head = self._head  # first the head, then the types: they were set before it moved (`_commit`)
                if types is None or self._untyped_through >= seq:
                    return True, head
                last = self._last_of_type
                if any(last.get(t, 0) >= seq for t in (types if prompt is None else prompt)):
                    return True, head
                now = time.monotonic()
                left = linger - (now - woke) if deadline is None else min(linger - (now - woke), deadline - now)
                if left <= 0 or self._nudges != nudges:
                    return any(last.get(t, 0) >= seq for t in types), head
                self._cond.wait(left)

    def nudge(self) -> None:
        """Readers lingering in `wait_for` (only events they do not read came) return now: someone waits for every
        reader to reach the head (waiting for idle looks at their positions)."""
        with self._cond:
            self._nudges += 1
            self._cond.notify_all()

    def stream_version(self, stream: str, agent: str | None = None) -> int:
        """The version of `agent`'s stream (of the one agent that has a stream of that name when `agent` is None)."""
        return max((v for (a, s), v in self._streams.items() if s == stream and agent in (None, a)), default=0)

    def streams(self) -> dict[tuple[str, str], int]:
        """Every stream, named (agent, stream), with its version."""
        return dict(self._streams)

    def read(self, after: int = 0, **filters: Any) -> list[Recorded]:
        """Events with seq > `after` in seq order, filtered by position, stream, type, agent and time
        (the keyword arguments of `read_rows`). A stored event that does not decode reads as an `Unreadable`
        stand-in (for whole-log readers; a reader asking for types gets only events of those types)."""
        events = decode_rows(self.read_rows(after, **filters), self.shard)
        if filters.get("types") is not None:
            events = [r for r in events if not isinstance(r.event, Unreadable)]
        return events

    def read_rows(
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
    ) -> list[tuple[Any, ...]]:
        """What `read` returns, as the log's rows with their payloads undecoded (`decode_rows` makes the
        events): plain tuples cross a process boundary several times cheaper than event objects, and the
        reader's process decodes them instead of the log's."""
        where: list[str] = ["seq > ?"]
        args: list[Any] = [after]
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
        cached = self._from_tail(after, limit, to_seq, stream, types, agent, since_us, until_us)
        if cached is not None:
            return cached
        sql = f"{_SELECT} WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        cur = self._cursor()
        try:
            return cur.execute(sql, args).fetchall()
        finally:
            cur.close()

    def _from_tail(self, after: int, limit: int | None, to_seq: int | None, stream: str | None,
                   types: Iterable[str] | None, agent: str | None, since_us: int | None,
                   until_us: int | None) -> list[tuple[Any, ...]] | None:
        """`read_rows` from the tail when it holds every row after `after` (None: it does not, ask DuckDB): the same
        rows, filtered the same way, in seq order."""
        first, rows = self._tail
        if after + 1 < first or first + len(rows) <= self._head:  # rows before it, or after it (not written by a commit)
            return None
        held = rows[after + 1 - first:]
        if to_seq is not None:
            held = [r for r in held if r[0] <= to_seq]
        if stream is not None:
            held = [r for r in held if r[1] == stream]
        if types is not None:
            wanted = set(types)
            held = [r for r in held if r[5] in wanted]
        if agent is not None:
            held = [r for r in held if r[3] == agent]
        if since_us is not None:
            held = [r for r in held if r[4] >= since_us]
        if until_us is not None:
            held = [r for r in held if r[4] <= until_us]
        return held if limit is None else held[:max(0, int(limit))]

    def iter_events(self, after: int = 0, *, to_seq: int | None = None, batch: int = 50_000, **filters: Any) -> Iterator[Recorded]:
        """All matching events after `after`, read in batches."""
        position = after
        while True:
            chunk = self.read(position, limit=batch, to_seq=to_seq, **filters)
            if not chunk:
                return
            yield from chunk
            position = chunk[-1].seq

    def read_stream(self, stream: str, from_version: int = 1, *, agent: str | None = None) -> list[Recorded]:
        """The events of a stream in version order (of `agent`'s stream of that name, or of every agent's)."""
        cur = self._cursor()
        try:
            rows = cur.execute(
                f"{_SELECT} WHERE stream = ? AND stream_version >= ? AND (? IS NULL OR agent = ?) "
                "ORDER BY stream_version, seq", [stream, from_version, agent, agent]
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

    def _record(self, row: tuple[Any, ...]) -> Recorded:
        return decode_rows([row], self.shard)[0]

    def query(self, sql: str, params: Sequence[Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run read-only SQL on this shard's connection; returns column names and rows."""
        cur = self._cursor()
        try:
            res = cur.execute(sql, params or [])
            names = [d[0] for d in res.description] if res.description else []
            return names, res.fetchall()
        finally:
            cur.close()

    # ------------------------------------------------------------------ erasure

    @contextmanager
    def _commit_turn(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The writer's connection for a whole-log change (erase, import, removal): no append commits meanwhile."""
        with self._cond:
            while self._committing:
                self._cond.wait()
            self._committing = True
        try:
            yield self._con
        finally:
            with self._cond:
                self._committing = False
                self._cond.notify_all()

    def erase(self, seqs: Sequence[int], *, keep_ids: bool = False) -> int:
        """Replace the payloads of `seqs` with `Purged` tombstones naming only the original type, in one
        transaction; positions, streams and versions stay. `compact_database` then rewrites the file so the
        old bytes do not linger in free blocks. `keep_ids`: the tombstones keep their event ids (ids, never text),
        so a policy that decides the same again (its deterministic id) is acknowledged without writing: what a
        deleted memory needs while the messages it was made from stay in the log."""
        with self._commit_turn() as con:
            self._reset_tail()  # before the change: no read after the commit may find the old payloads in memory
            con.execute("BEGIN TRANSACTION")
            try:
                changed = con.execute(
                    """
                    UPDATE events SET
                        payload = '{"type":"Purged","original_type":"' || type || '"}',
                        type = 'Purged', schema_version = 1, event_id = CASE WHEN ? THEN event_id END
                    WHERE seq IN (SELECT unnest(?::BIGINT[])) AND type <> 'Purged'
                      AND type NOT IN (SELECT unnest(?::VARCHAR[]))
                    """,
                    [keep_ids, list(seqs), list(FORGET_MARKERS)],
                ).fetchall()[0][0]
                if not keep_ids:  # tombstones that kept their ids (a deleted memory's) give them up too
                    con.execute("UPDATE events SET event_id = NULL WHERE seq IN (SELECT unnest(?::BIGINT[])) "
                                "AND type = 'Purged' AND event_id IS NOT NULL", [list(seqs)])
                con.execute("COMMIT")
            except Exception:
                con.execute("ROLLBACK")
                raise
            self._ids.clear()  # event ids of erased events are gone: reload lazily
            self._reset_tail()  # (again: nothing refills it meanwhile, commits wait for this turn)
            return int(changed)

    # ------------------------------------------------------------------ moving agents (re-sharding)

    def export_agents(self, agents: Sequence[str], after: int = 0, limit: int = 50_000) -> pa.Table:
        """The log rows of `agents` after `after`, whole (every column), in seq order: what re-sharding moves."""
        cur = self._cursor()
        try:
            return cur.sql(
                f"SELECT * FROM events WHERE seq > ? AND agent IN (SELECT unnest(?)) ORDER BY seq LIMIT {int(limit)}",
                params=[after, list(agents)]).to_arrow_table()
        finally:
            cur.close()

    def import_rows(self, table: pa.Table) -> int:
        """Insert rows another shard's log exported (`export_agents`), keeping their positions, versions and ids.

        Only after this log's head (a shard split off another one holds a subset of its parent's positions), and
        only for streams this log does not have yet or continues exactly: anything else is refused, nothing written.
        """
        if table.num_rows == 0:
            return 0
        seqs = table.column("seq").to_pylist()
        with self._commit_turn() as con:
            if seqs[0] <= self._head or seqs != sorted(seqs):
                raise AppendError(f"imported rows must follow the log's head {self._head} in order (first {seqs[0]})")
            streams = dict(self._streams)
            for stream, version, agent in zip(table.column("stream").to_pylist(), table.column("stream_version").to_pylist(),
                                              table.column("agent").to_pylist()):
                have = streams.get((agent, stream), 0)
                if version != have + 1:
                    raise AppendError(f"imported stream {stream!r} of agent {agent!r} does not continue at version "
                                      f"{have + 1} (row has {version})")
                streams[(agent, stream)] = version
            con.execute("BEGIN TRANSACTION")
            try:
                con.register("_import", table)
                con.execute("INSERT INTO events SELECT * FROM _import")
                con.unregister("_import")
                con.execute("COMMIT")
            except Exception:
                con.execute("ROLLBACK")
                raise
            self._streams = streams
            self._ids.clear()
            self._untyped_through = max(self._untyped_through, seqs[-1])  # (before the head moves, see wait_for)
            self._head = max(self._head, seqs[-1])  # only once the rows are in: a refused import moves nothing
            self._reset_tail()
        return int(table.num_rows)

    def remove_agents(self, agents: Sequence[str]) -> int:
        """Delete every event of `agents` from this log (they moved to another shard, which holds them now).
        Positions of the other events do not change; the head becomes the last remaining event's, as a reopened
        log would find it (the moved positions may be used again here: they live on in the other shard)."""
        with self._commit_turn() as con:
            self._reset_tail()  # before the delete: no read after it may find the removed rows in memory
            removed: int = con.execute("DELETE FROM events WHERE agent IN (SELECT unnest(?))", [list(agents)]).fetchall()[0][0]
            gone = set(agents)
            self._streams = {key: v for key, v in self._streams.items() if key[0] not in gone}
            self._ids.clear()
            self._untyped_through = 1 << 62  # positions may be used again: no event type is known any more
            self._head = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()[0][0]
            self._reset_tail()
            return removed

    def purge_streams(self, streams: Sequence[str], *, before_seq: int | None = None) -> int:
        """Erase `streams` and what derives from them (`erasure.plan`); returns the number of events erased."""
        return self.erase(plan(self, streams, before_seq=before_seq).seqs)

    def checkpoint(self) -> None:
        self._con.execute("CHECKPOINT")

    def schema_version(self) -> int:
        """The shape of this log (`LOG_SCHEMA_VERSION` once opened for writing)."""
        rows = self._con.execute(
            "SELECT max(version) FROM log_schema" if _has_table(self._con, "log_schema") else "SELECT 1").fetchall()
        return int(rows[0][0] or 1)

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
        except duckdb.Error as exc:  # e.g. a full disk: what was committed is in the WAL, replayed at the next open
            log.warning("closing %s without a checkpoint: %s", self.path, exc)
        finally:
            self._reader_base.close()
            self._con.close()


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND schema_name = 'main' "
        "AND database_name = current_database()", [name]).fetchall()[0][0])


def _migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Create the log, or bring a log written by an older engram to `LOG_SCHEMA_VERSION`, in one transaction.

    1 -> 2: the table is re-created under `UNIQUE (agent, stream, stream_version)` with every row as it was
    (positions, versions, ids, payloads: nothing a fold reads changes, so replay gives the same bytes). DuckDB cannot
    change a constraint in place, hence the copy. A log at version 2 is left alone: opening it again migrates nothing.
    """
    old = _has_table(con, "events") and not _has_table(con, "log_schema")
    con.execute("BEGIN TRANSACTION")
    try:
        if old:
            con.execute("ALTER TABLE events RENAME TO events_v1")
        con.execute(SCHEMA)
        if old:
            con.execute("INSERT INTO events SELECT * FROM events_v1 ORDER BY seq")
            con.execute("DROP TABLE events_v1")
        if not con.execute("SELECT count(*) FROM log_schema").fetchall()[0][0]:
            con.execute("INSERT INTO log_schema VALUES (?)", [LOG_SCHEMA_VERSION])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    if old:
        log.info("event log migrated to schema %d (discussion ids per agent)", LOG_SCHEMA_VERSION)


def decode_rows(rows: Sequence[tuple[Any, ...]], shard: int = 0) -> list[Recorded]:
    """The events of rows from `EventStore.read_rows` (payloads decoded and upcast). A row that does not decode
    (written before events were validated, or by a newer engram) becomes an `Unreadable` stand-in, so that one
    such row never stops a reader: the projection runner quarantines it (`fold_failed`)."""
    decode = codec.decode
    try:
        return [
            Recorded(seq, stream, version, agent, ts_us, decode(type_, sv, payload), causation, event_id, shard)
            for seq, stream, version, agent, ts_us, type_, sv, payload, causation, event_id in rows
        ]
    except Exception:  # read row by row, and stand in for what does not decode
        return [_decoded_or_unreadable(row, shard) for row in rows]


def _decoded_or_unreadable(row: tuple[Any, ...], shard: int) -> Recorded:
    seq, stream, version, agent, ts_us, type_, schema_version, payload, causation, event_id = row
    try:
        event = codec.decode(type_, schema_version, payload)
    except Exception as exc:
        event = Unreadable(original_type=type_, error=f"{type(exc).__name__}: {exc}"[:500])
    return Recorded(seq, stream, version, agent, ts_us, event, causation, event_id, shard)



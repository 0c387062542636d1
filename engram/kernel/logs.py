"""engram's logging: set up once per process by its composition root; one line per record; never a wait on the stream.

    configure()                 the server (`engram.boot.serve`) and `engram mcp` call it first thing
    keep_root_handlers()        around code that configures the root logger behind our back (the MCP SDK)

- The root logger has one handler, a `QueueHandler`: the thread that logs (often the server's event loop) only puts
  the record on a bounded queue; a listener thread formats it and writes it. A slow or stalled stream (a terminal
  paused with Ctrl-S, a pipe nobody reads, a slow disk) delays the log, never a request. When the queue is full,
  records are dropped and counted; the next line written says how many.
- Every record is one line, its exception too: `ValueError: bad thing (engram/x.py:12 in f)` instead of a traceback
  (a flood of failing requests cannot flood the log, and each record costs microseconds to format).
- Third-party libraries never put a handler on the root logger: the MCP SDK's `MCPServer()` calls
  `logging.basicConfig` with a Rich traceback handler (about a second per logged traceback, on the event loop);
  `basicConfig` does nothing once the root has a handler, and `keep_root_handlers` undoes what any library adds in
  a process that has not called `configure`.

Stdlib only.
"""

from __future__ import annotations

import atexit
import logging
import logging.handlers
import os
import queue
import sys
import threading
import traceback
from contextlib import contextmanager
from typing import Iterator, TextIO

# Records waiting for the listener thread; past this a record is dropped (and counted) rather than waited for.
QUEUE_RECORDS = 10_000
# The level of engram's own loggers (the root stays at WARNING: libraries' INFO chatter is not ours to print).
ENGRAM_LEVEL = logging.INFO
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# How long the process waits at exit for queued records to be written (a stalled stream must not hold up an exit).
EXIT_FLUSH_S = 2.0

_lock = threading.Lock()
_writer: tuple[queue.Queue[logging.LogRecord | None], threading.Thread] | None = None


def one_line(text: str) -> str:
    """`text` on one line: line breaks become ' | ' (a multi-line SQL error stays one record of the log)."""
    return " | ".join(part.strip() for part in str(text).splitlines() if part.strip())


def describe(exc: BaseException) -> str:
    """An exception in one line: its type, message and innermost frame (`KeyError: 'x' (engram/a.py:12 in f)`)."""
    text = f"{type(exc).__name__}: {one_line(str(exc))}" if str(exc) else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    if frames:
        last = frames[-1]
        where = last.filename
        for root in sys.path:  # a path relative to its import root reads shorter: engram/server/auth.py
            if root and where.startswith(root.rstrip(os.sep) + os.sep):
                where = where[len(root.rstrip(os.sep)) + 1:]
                break
        text += f" ({where}:{last.lineno} in {last.name})"
    return text


class OneLineFormatter(logging.Formatter):
    """Each record as one line; an exception as `describe` puts it, never as a traceback."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        record.message = one_line(record.getMessage())
        record.asctime = self.formatTime(record)
        line = self.formatMessage(record)
        if record.exc_info and record.exc_info[1] is not None:
            line += f": {describe(record.exc_info[1])}"
        return line


class _Enqueue(logging.handlers.QueueHandler):
    """Puts records on the listener's queue without ever blocking; counts what a full queue dropped."""

    def __init__(self, q: queue.Queue[logging.LogRecord | None]):
        super().__init__(q)
        self.dropped = 0

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        # The message is fixed now (its arguments may change later); the exception is formatted by the listener,
        # off this thread.
        record.msg, record.args = record.getMessage(), None
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


class _Write(logging.StreamHandler[TextIO]):
    """The listener's handler: writes each line, first saying how many records a full queue dropped."""

    def __init__(self, stream: TextIO, enqueue: _Enqueue):
        super().__init__(stream)
        self.enqueue = enqueue
        self.setFormatter(OneLineFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        dropped, self.enqueue.dropped = self.enqueue.dropped, 0
        if dropped:
            super().emit(logging.makeLogRecord({"name": "engram.kernel.logs", "levelno": logging.WARNING, "levelname": "WARNING",
                                                "msg": f"{dropped} log records dropped (the log stream was too slow)"}))
        super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        pass  # a stream that cannot be written to (closed, full disk): the record is lost, nothing else is


def configure(stream: TextIO | None = None) -> None:
    """Log to `stream` (default: stderr) through a queue, one line per record. Once per process (later calls keep
    the first stream); the root logger ends up with this one handler, whatever was there before."""
    global _writer
    with _lock:
        if _writer is not None:
            return
        q: queue.Queue[logging.LogRecord | None] = queue.Queue(QUEUE_RECORDS)
        enqueue = _Enqueue(q)
        thread = threading.Thread(target=_write_all, args=(q, _Write(stream or sys.stderr, enqueue)),
                                  name="engram-log", daemon=True)
        thread.start()
        _writer = (q, thread)
        atexit.register(_flush_at_exit)
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.addHandler(enqueue)
        root.setLevel(logging.WARNING)
        logging.getLogger("engram").setLevel(ENGRAM_LEVEL)


def _write_all(q: queue.Queue[logging.LogRecord | None], handler: logging.Handler) -> None:
    """The listener thread: writes records until the end mark (None)."""
    while (record := q.get()) is not None:
        handler.handle(record)


def _flush_at_exit() -> None:
    """At exit: let the listener write what is queued, for a moment at most."""
    if _writer is None:
        return
    q, thread = _writer
    try:
        q.put(None, timeout=EXIT_FLUSH_S)
    except queue.Full:
        return
    thread.join(EXIT_FLUSH_S)


@contextmanager
def keep_root_handlers() -> Iterator[None]:
    """The root logger's handlers and level after the block are those before it: a library that configures
    logging on import or construction (`logging.basicConfig`) changes nothing."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)

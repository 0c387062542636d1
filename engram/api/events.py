"""`GET /v1/events`: what the log records, as it happens, to every subscriber (the event-sourced core's webhook).

One `EventFeed` per API (per server process) learns of new appends the way the policies do: a thread per shard
long-polls the shard (`wait`, the EventStore's condition variable: woken by the commit, no polling of the DuckDB
file), reads what was committed once, and hands each event to every subscriber's bounded queue. A subscriber that
falls `buffer` events behind is cut: it gets a final `cut` event with the position to resume from, and the writer
never waits for it. A subscriber from an older position reads the log itself (paged) up to where the feed took over.

Positions: a cursor is the last seq delivered of every shard, written `s0.s1.…` (one shard: the seq alone); it is
every SSE event's `id`, so `Last-Event-ID` resumes exactly after the last event a client saw.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generator, Iterator, Sequence

from engram.api.errors import error

if TYPE_CHECKING:
    from engram.runtime.base import Runtime

log = logging.getLogger(__name__)

WAIT_S = 10.0  # a shard long-poll's timeout (the feed's threads notice a close within this)
PAGE = 1000  # events read at once
DEFAULT_BUFFER = 10_000  # events a subscriber may fall behind before it is cut


def parse_cursor(text: str | None, shards: int) -> list[int] | None:
    """`s0.s1.…` (or one seq for a one-shard home) as a seq per shard; None for no cursor. A cursor of another
    shard count is refused (the home was re-sharded: start again from a position of now)."""
    if text is None or text == "":
        return None
    parts = text.split(".")
    try:
        seqs = [int(p) for p in parts]
    except ValueError:
        raise error("invalid_request", f"position {text!r}: write the seq of each shard, separated by '.'") from None
    if len(seqs) != shards or any(s < 0 for s in seqs):
        raise error("invalid_request", f"position {text!r} names {len(seqs)} shard(s); this home has {shards}")
    return seqs


def format_cursor(seqs: Sequence[int]) -> str:
    return ".".join(str(s) for s in seqs)


@dataclass(frozen=True)
class FeedEvent:
    shard: int
    seq: int
    stream: str
    agent: str
    ts_us: int
    type: str
    payload: str  # the JSON payload as the log holds it
    causation: int | None


@dataclass
class Subscriber:
    """One subscriber's queue: what the feed has read and the subscriber has not yet taken."""

    buffer: int
    queue: collections.deque[FeedEvent] = field(default_factory=collections.deque)
    cond: threading.Condition = field(default_factory=threading.Condition)
    cut: str | None = None  # why it was cut (it gets a final `cut` event)
    closed: bool = False

    def offer(self, events: list[FeedEvent]) -> None:
        with self.cond:
            if self.cut is not None or self.closed:
                return
            if len(self.queue) + len(events) > self.buffer:
                self.cut = f"too slow: more than {self.buffer} events behind"
                self.queue.clear()
            else:
                self.queue.extend(events)
            self.cond.notify_all()

    def take(self, timeout: float) -> list[FeedEvent]:
        with self.cond:
            if not self.queue and self.cut is None and not self.closed:
                self.cond.wait(timeout)
            out = list(self.queue)
            self.queue.clear()
            return out


class EventFeed:
    """The fan-out of one server: a long-poll thread per shard, started with the first subscriber."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._lock = threading.Lock()
        self._subs: list[Subscriber] = []
        self._heads: list[int] | None = None  # the last seq the feed has handed out, per shard
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    def shards(self) -> int:
        config = self.rt.config
        assert config is not None  # a runtime is made with its configuration
        return int(config.shards)

    def heads(self) -> list[int]:
        heads = self.rt.heads()
        return [heads.get(s, 0) for s in range(self.shards())]

    def subscribe(self, buffer: int = DEFAULT_BUFFER) -> tuple[Subscriber, list[int]]:
        """A new subscriber and the feed's position: it receives every event after that position."""
        sub = Subscriber(buffer)
        with self._lock:
            if self._heads is None:
                self._heads = self.heads()
                self._start()
            self._subs.append(sub)
            return sub, list(self._heads)

    def unsubscribe(self, sub: Subscriber) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)
        with sub.cond:
            sub.closed = True
            sub.cond.notify_all()

    def _start(self) -> None:
        for shard in range(self.shards()):
            thread = threading.Thread(target=self._follow, args=(shard,), name=f"engram-events-{shard}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _follow(self, shard: int) -> None:
        heads = self._heads
        assert heads is not None  # set before the followers start
        while not self._stop.is_set():
            try:
                after = heads[shard]
                if not self.rt.shard_call(shard, "wait", after + 1, WAIT_S):
                    continue
                events = self.read(shard, after, PAGE)
                if not events:
                    continue
                with self._lock:
                    heads[shard] = events[-1].seq
                    subs = list(self._subs)
                for sub in subs:
                    sub.offer(events)
            except Exception as exc:  # a shard restarting: try again after a moment
                log.warning("event feed of shard %d: %s", shard, exc)
                self._stop.wait(1.0)

    def read(self, shard: int, after: int, limit: int, to_seq: int | None = None) -> list[FeedEvent]:
        rows = self.rt.shard_call(shard, "read_page", after, limit, to_seq)
        return [FeedEvent(shard, seq, stream, agent, ts_us, type_, payload, causation)
                for seq, stream, _v, agent, ts_us, type_, _sv, payload, causation, _id in rows]

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            self.unsubscribe(sub)


def stream(feed: EventFeed, *, after: list[int] | None, agents: frozenset[str] | None, types: frozenset[str] | None,
           buffer: int = DEFAULT_BUFFER, keepalive_s: float = 15.0, follow: bool = True) -> Generator[tuple[str, str, str], None, None]:
    """What one subscriber receives, as (SSE event name, id, data) triples; ("", "", "") is a keep-alive.

    Events after `after` (None: from now on) of `agents` (None: every agent) and `types` (None: every type), in log
    order per shard; history first, read from the log, then what the feed hands out. `follow=False`: the events up to
    now, then the end (a `caught-up` event)."""
    sub, joined = feed.subscribe(buffer)
    try:
        cursor = list(joined) if after is None else list(after)
        # History: from the cursor up to where the feed took over.
        for shard in range(len(cursor)):
            while cursor[shard] < joined[shard]:
                page = feed.read(shard, cursor[shard], PAGE, to_seq=joined[shard])
                if not page:
                    break
                for ev in page:
                    cursor[shard] = ev.seq
                    if _wanted(ev, agents, types):
                        yield ev.type, format_cursor(cursor), _data(ev)
        if not follow:
            yield "caught-up", format_cursor(cursor), json.dumps({"position": format_cursor(cursor)})
            return
        while True:
            events = sub.take(keepalive_s)
            if sub.cut is not None:
                yield "cut", format_cursor(cursor), json.dumps(
                    {"reason": sub.cut, "resume": format_cursor(cursor),
                     "hint": "reconnect with Last-Event-ID (or ?after=) set to `resume`"})
                return
            if sub.closed:
                return
            if not events:
                yield "", "", ""
                continue
            for ev in events:
                if ev.seq <= cursor[ev.shard]:
                    continue  # already read as history
                cursor[ev.shard] = ev.seq
                if _wanted(ev, agents, types):
                    yield ev.type, format_cursor(cursor), _data(ev)
    finally:
        feed.unsubscribe(sub)


def _wanted(ev: FeedEvent, agents: frozenset[str] | None, types: frozenset[str] | None) -> bool:
    return (agents is None or ev.agent in agents) and (types is None or ev.type in types)


def _data(ev: FeedEvent) -> str:
    from engram.api.clock import iso

    return (f'{{"shard":{ev.shard},"seq":{ev.seq},"stream":{json.dumps(ev.stream)},"agent":{json.dumps(ev.agent)},'
            f'"type":{json.dumps(ev.type)},"ts":"{iso(ev.ts_us)}","causation":{json.dumps(ev.causation)},'
            f'"payload":{ev.payload}}}')

"""How long a policy actor's long poll waits when only events its policies never read, or read `unhurried` (a
recall's TraceRetrieved), came (issue 27): about a second, so that under a recall load each actor wakes about once a
second instead of four times; an event they read promptly (a new message) still ends the wait at once. The poll as
`PolicyActor._loop` makes it, on a real shard in this process (no Ray)."""

from __future__ import annotations

import threading
import time

from tests.events.helpers import write

from engram.actors.policy import POLL_TIMEOUT_S, UNREAD_LINGER_S
from engram.events.cognitive import TraceRetrieved
from engram.events.envelope import NewEvent, Write
from engram.shard.host import ShardHost

T0 = 1_767_225_600_000_000
READS = ["MessageAppended", "TraceRetrieved"]  # e.g. the working memory policy: TraceRetrieved unhurried
PROMPT = ["MessageAppended"]


def _retrieved(n: int, at: int = 0) -> Write:
    return Write("d1", "agent0", tuple(NewEvent(TraceRetrieved(query=f"q{at + i}", trace_ids=("t1",)), T0 + at + i)
                                       for i in range(n)))


def test_an_actor_woken_only_by_unhurried_events_waits_about_a_second_and_at_once_for_one_it_reads(tmp_path):
    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "live", background=False)
    try:
        host.append_many([_retrieved(2)])  # seqs 1-2
        started = time.monotonic()
        assert host.wait_for(1, READS, POLL_TIMEOUT_S, UNREAD_LINGER_S, PROMPT) == (True, 2)
        assert time.monotonic() - started >= 0.9  # not at once, not after a quarter of a second
        results: list = []
        waiter = threading.Thread(target=lambda: results.append(
            (host.wait_for(3, READS, POLL_TIMEOUT_S, UNREAD_LINGER_S, PROMPT), time.monotonic())))
        waiter.start()
        host.append_many([_retrieved(1, at=2)])  # seq 3: unhurried, the poll goes on waiting ...
        time.sleep(0.05)
        assert results == []
        sent = time.monotonic()
        host.append_many([write("d1", range(1), agent="agent0")])  # ... seq 4: a message, read at once
        waiter.join(5)
        assert results and results[0][0] == (True, 4) and results[0][1] - sent < 0.8
    finally:
        host.close()

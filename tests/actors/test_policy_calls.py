"""Questions to hosted policies (`HostedCalls`, what a PolicyActor runs on its threads), over a real shard in this
process: read-only calls run side by side, other calls and the fold run alone, and a caller sees the writes of its
earlier calls folded."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from engram.actors.policy import HostedCalls
from engram.config.home import Home
from engram.events.cognitive import MoodChanged
from engram.events.envelope import NewEvent, Write
from engram.policies.base import Policy, PolicyContext
from engram.policies.host import PolicyHost
from engram.shard.host import ShardHost

AGENT = "ada"
T0 = 1_767_225_600_000_000
GUARD_S = 3  # only a guard against a hang: a call that never met its partner fails the test


class Moods(Policy):
    """Counts the MoodChanged events it folded; `ask` queues one more (as a recall queues its TraceRetrieved)."""

    name = "moods"
    interests = frozenset({"MoodChanged"})
    concurrent_reads = frozenset({"ask", "meet"})

    def __init__(self, ctx):
        super().__init__(ctx)
        self.folded = 0
        self.outbox: list[Write] = []
        self.lock = threading.Lock()
        self.barrier: threading.Barrier | None = None
        self.gate = None

    def handle(self, batch):
        self.folded += len(batch)
        return []

    def take_writes(self):
        with self.lock:
            out, self.outbox = self.outbox, []
        return out

    def ask(self) -> int:
        seen = self.folded
        with self.lock:
            self.outbox.append(Write(f"agent:{AGENT}", AGENT, (NewEvent(MoodChanged(0.1, 0.0, 0.0, "asked"), T0 + seen),)))
        return seen

    def meet(self) -> int:
        """Returns once as many callers as the barrier's parties are inside at the same time."""
        self.barrier.wait()
        return self.folded

    def poke(self) -> bool:
        """Not read-only: while it runs, nobody holds the lock shared."""
        try:
            with self.gate.shared(timeout=0):
                return False
        except TimeoutError:
            return True


@pytest.fixture
def hosted(tmp_path):
    shard = ShardHost(tmp_path / "log" / "shard-000.duckdb", tmp_path / "projections", background=False)
    ctx = PolicyContext(shard=0, home=Home(tmp_path), services={}, read=shard.read, append=shard.append_many)
    policy = Moods(ctx)
    host = PolicyHost([policy], read=shard.read, append=shard.append_many, head=shard.head, state_dir=None)
    calls = HostedCalls(host)
    policy.gate = calls.lock
    yield calls, policy, shard
    calls.stop()
    shard.close()


def test_read_only_calls_of_one_policy_run_at_the_same_time(hosted):
    calls, policy, _ = hosted
    policy.barrier = threading.Barrier(4, timeout=GUARD_S)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: calls.call("moods", "meet"), range(4)))
    assert answers == [0, 0, 0, 0]  # all four were inside `meet` at once: none waited for another


def test_a_call_that_is_not_read_only_runs_alone(hosted):
    calls, _, _ = hosted
    assert calls.call("moods", "poke") is True


def test_each_call_sees_the_writes_of_the_calls_before_it_folded(hosted):
    calls, policy, shard = hosted
    assert [calls.call("moods", "ask", min_position=1) for _ in range(3)] == [0, 1, 2]
    calls.stop()
    assert len(shard.read(0, types=["MoodChanged"])) == 3  # every write appended once


def test_writes_of_concurrent_calls_are_all_appended_once_and_a_later_call_sees_them(hosted):
    calls, policy, shard = hosted
    policy.barrier = threading.Barrier(3, timeout=GUARD_S)

    def ask_together(_):
        calls.call("moods", "meet")
        return calls.call("moods", "ask", min_position=1)

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(ask_together, range(3)))
    assert calls.call("moods", "ask", min_position=1) == 3
    calls.stop()
    assert len(shard.read(0, types=["MoodChanged"])) == 4
    assert calls.appends <= 4


def test_a_call_without_min_position_does_not_wait_for_earlier_calls_writes(hosted, monkeypatch):
    calls, policy, shard = hosted
    release = threading.Event()
    append = calls.host.append

    def held_append(writes):
        release.wait(GUARD_S)
        return append(writes)

    monkeypatch.setattr(calls.host, "append", held_append)
    assert calls.call("moods", "ask") == 0  # its write is held back in the flusher ...
    assert calls.call("moods", "ask") == 0  # ... and this call did not wait for it
    release.set()
    assert calls.call("moods", "ask", min_position=1) == 2  # a fresh call waits for both


def test_a_call_first_catches_up_with_the_log_up_to_min_position(hosted):
    calls, policy, shard = hosted
    appended = shard.append_many([Write(f"agent:{AGENT}", AGENT, (NewEvent(MoodChanged(0.5, 0.0, 0.0, "set"), T0),))])
    policy.barrier = threading.Barrier(1, timeout=GUARD_S)
    assert calls.call("moods", "meet", min_position=appended[0].seqs[0]) == 1


def test_an_unknown_policy_is_refused_with_the_hosted_ones_named(hosted):
    calls, _, _ = hosted
    with pytest.raises(ValueError, match="hosted: \\['moods'\\]"):
        calls.call("nobody", "ask")


def test_the_calls_own_writes_are_folded_as_the_log_holds_them_without_reading_them_back(hosted, monkeypatch):
    calls, policy, shard = hosted
    seen = []
    monkeypatch.setattr(policy, "handle", lambda batch: seen.extend(batch) or [])
    reads = []
    read = calls.host._read
    monkeypatch.setattr(calls.host, "_read", lambda after, **kw: reads.append(after) or read(after, **kw))
    for _ in range(3):
        calls.call("moods", "ask", min_position=1)
    calls.stop()
    assert reads == [] and calls.host.position == shard.head() == 3  # folded straight from what was written
    assert seen == shard.read(0, types=["MoodChanged"])  # exactly the events the log holds (seqs, versions, times)


def test_the_calls_writes_are_read_from_the_log_when_another_write_came_between(hosted, monkeypatch):
    calls, policy, shard = hosted
    append = calls.host.append

    def another_first(writes):  # someone else's event lands just before the calls' write
        shard.append_many([Write(f"agent:{AGENT}", AGENT, (NewEvent(MoodChanged(0.5, 0.0, 0.0, "other"), T0),))])
        return append(writes)

    monkeypatch.setattr(calls.host, "append", another_first)
    calls.call("moods", "ask", min_position=1)
    assert calls.call("moods", "ask", min_position=1) == 2  # both folded, in log order (read from it)

"""A recall answers first; what it implies (its TraceRetrieved: every returned trace reinforced, the best wired
together) is appended after the answer has left, several recalls' in one append, folded in one pass in log order.
Over a real shard and a real trace reader in this process (`HostedCalls`, what the trace reader's Ray actor runs):
the next recall sees the reinforcement, and the memory it is folded into is the memory replay folds from the log."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from engram.actors.policy import HostedCalls
from engram.config.home import Home
from engram.config.service import ServiceConfig
from engram.events.envelope import NewEvent, Write
from engram.events.messages import MessageAppended
from engram.policies.auto_ingest import AutoIngest
from engram.policies.base import PolicyContext
from engram.policies.host import PolicyHost
from engram.policies.trace_reader import TraceReader
from engram.providers.embeddings.hashing import HashingEmbedder
from engram.shard.host import ShardHost

AGENT = "ann"
T0 = 1_767_225_600_000_000
HOUR_US = 3_600 * 1_000_000
SAID = ["I'm building a Next.js app called Acme Dashboard with Supabase auth, due on March 9.",
        "My sister Ana moved to Lisbon in 2021 and she works as a marine biologist there.",
        "We picked Recharts for the dashboard graphs because it renders on the server.",
        "The launch party is in Porto, at the rooftop bar near the river, on March 12.",
        "Dmitri owns the Postgres schema and the row-level security policies."]
QUESTIONS = ["When is the dashboard due?", "Where does Ana live?", "Which charting library renders the graphs?",
             "Where is the launch party?", "Who owns the Postgres schema?", "What is Ana's job?",
             "What auth does Acme Dashboard use?", "Which city is the party in?"]


def turn(n: int, content: str) -> Write:
    return Write(stream="ann-chat", agent=AGENT, events=(NewEvent(
        event=MessageAppended(role="user", content=content, message_id=f"m{n}", token_estimate=len(content) // 4,
                              name="Ann"),
        ts_us=T0 + n * 60_000_000, event_id=f"m{n}"),))


@pytest.fixture
def world(tmp_path):
    from engram.providers.llm.factory import make_tasks

    config = ServiceConfig()
    services = {"config": config, "tasks": make_tasks(config.llm), "embedder": HashingEmbedder()}
    shard = ShardHost(tmp_path / "log.duckdb", tmp_path / "proj", background=False)

    def context() -> PolicyContext:
        return PolicyContext(shard=0, home=Home(tmp_path), services=services, read=shard.read, append=shard.append_many)

    def host(policy) -> PolicyHost:
        return PolicyHost([policy], read=shard.read, append=shard.append_many, head=shard.head, state_dir=None)

    ingest = host(AutoIngest(context()))
    shard.append_many([turn(n, text) for n, text in enumerate(SAID)])
    ingest.run_until_caught_up()
    calls = HostedCalls(host(TraceReader(context())), 0)
    calls.catch_up(shard.head())
    yield calls, shard, context, host
    calls.stop()
    shard.close()


def recall(calls: HostedCalls, question: str, at_us: int, **kw):
    return calls.call("trace-reader", "recall", AGENT, question, now_us=at_us, limit=3, hyde=False, **kw)


def test_the_next_recall_sees_the_reinforcement_of_the_one_before(world):
    calls, shard, _, _ = world
    at = T0 + 2 * HOUR_US
    first = recall(calls, QUESTIONS[0], at, min_position=shard.head())
    assert first.hits
    again = recall(calls, QUESTIONS[0], at + HOUR_US, min_position=1)  # a fresh read: the earlier recall's effects
    counts = {h.trace_id: h.retrieval_count for h in again.hits}
    for h in first.hits:
        if h.trace_id in counts:
            assert counts[h.trace_id] == h.retrieval_count + 1  # reinforced once, by the recall before it
    assert any(h.trace_id in counts for h in first.hits)
    calls.stop()  # the second one's record is appended after its answer: by now
    assert [r.event.query for r in shard.read(0, types=["TraceRetrieved"])] == [QUESTIONS[0]] * 2


def test_concurrent_recalls_are_recorded_in_few_appends_and_fold_to_what_replay_folds(world):
    calls, shard, context, host = world
    at = T0 + 2 * HOUR_US
    barrier = threading.Barrier(4, timeout=5)

    def ask(i: int):
        if i < 4:
            barrier.wait()  # the first four at once
        return recall(calls, QUESTIONS[i % len(QUESTIONS)], at + i * 60_000_000, min_position=1)

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(ask, range(16)))
    recall(calls, QUESTIONS[0], at + HOUR_US, min_position=1)  # waits until the sixteen are appended and folded
    # The waiting recall's own record may be appended before this read (its append follows its answer): not counted.
    recorded = [r for r in shard.read(0, limit=None, types=["TraceRetrieved"]) if r.ts_us < at + HOUR_US]
    assert len(recorded) == 16 == sum(1 for a in answers if a.hits)
    assert calls.appends < 16  # recalls that queued while an append was under way went in the next one together
    calls.stop()  # the last recall's record appended (after its answer) and folded, like every one before it
    calls.catch_up(shard.head())  # on a loaded machine the flusher may still be folding when the last answer leaves
    live = calls.host.policies[0].memory(AGENT)
    replayed = host(TraceReader(context()))
    replayed.run_until_caught_up()  # the log folded from its start, as replay does
    again = replayed.policies[0].memory(AGENT)

    def state(mem):
        return ({tid: (t.retrieval_count, t.stability_s, t.last_access_us, t.interval_s, t.last_seq, t.active)
                 for tid, t in mem.book.traces.items()},
                sorted((e.src, e.dst, e.kind, round(e.weight, 9)) for e in mem.book.graph.edges.values()))

    assert sum(t.retrieval_count for t in live.book.traces.values()) >= 16
    assert state(live) == state(again)  # the same strengths, intervals and edges: deterministic


def test_a_flush_appends_what_answered_calls_left_even_before_they_counted_it(world):
    """A pause before a forget flushes the calls' writes: a recall that has answered (its TraceRetrieved in the
    reader's outbox) is recorded before the forget's marker, where the forget erases it with what it retrieved."""
    calls, shard, _, _ = world
    reader = calls.host.policies[0]
    # The policy answered; the call has not yet counted its writes as queued (it does so after its answer).
    assert reader.recall(AGENT, QUESTIONS[0], now_us=T0 + 2 * HOUR_US, limit=3, hyde=False).hits
    assert not shard.read(0, types=["TraceRetrieved"])
    calls.flush()
    assert [r.event.query for r in shard.read(0, types=["TraceRetrieved"])] == [QUESTIONS[0]]
    calls.flush()  # nothing left: a round that appends nothing
    assert len(shard.read(0, types=["TraceRetrieved"])) == 1
    calls.stop()
    calls.flush()  # after the stop (a pause of a closed member): returns, nothing to wait for


class _Member:
    """A policy process's member as a forget sees it (`PolicyForgetting`), over `HostedCalls` as `PolicyActor` does:
    a pause flushes the calls' records, a drain handles the log and flushes them again (`HostedCalls.drain`)."""

    def __init__(self, calls: HostedCalls, during_the_forget):
        self.calls, self.during_the_forget = calls, during_the_forget

    def pause(self):
        self.calls.flush()

    def resume(self):
        pass

    def discard_snapshots(self):
        self.during_the_forget()  # after the pause and the marker: a recall comes in and answers

    def drain(self):
        return self.calls.drain()

    def scrub(self, texts):
        return self.calls.host.scrub(texts)


def test_a_recall_answered_during_a_forget_is_recorded_in_time_to_be_erased_with_what_it_retrieved(world):
    """A forget plans its erasure right after its policies drain. A recall answered after the pause whose record the
    flusher has taken and not yet appended (slow here: the append waits 0.5 s) is in the log before that plan: the
    drain waits for it, so the forget finds the record (it retrieved forgotten traces) and erases it."""
    import time

    from engram.shard.forget import forget

    calls, shard, _, _ = world
    append, appending = calls.host._append, threading.Event()

    def slow(writes):
        if any(type(item.event).__name__ == "TraceRetrieved" for w in writes for item in w.events):
            appending.set()
            time.sleep(0.5)
        return append(writes)

    calls.host._append = slow
    asked = []

    def recall_now():
        answer = recall(calls, "Where is the launch party?", T0 + 2 * HOUR_US)  # queued: the flusher takes it
        asked.append([h.trace_id for h in answer.hits])
        assert appending.wait(10)  # the flusher holds the record, on its way to the log

    forget(shard, [_Member(calls, recall_now)], AGENT, "ann-chat")
    assert asked and asked[0]  # it retrieved traces of the discussion being forgotten
    calls.stop()
    assert shard.read(0, types=["TraceRetrieved"]) == []  # erased with the discussion, not appended after the erasure
    assert not any("launch party" in str(row[7]) for row in shard.read_rows(0, limit=None))

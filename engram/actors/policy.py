"""The policy actor: hosts a group of policies for one shard (one pool member) and keeps them
caught up with the log by long-polling the shard actor. The long poll names the event types the
policies read (`wait_for`): events of other types (a recall's TraceRetrieved, for the summarizers)
only move the positions on, without a read of the log, a pump or a query at the shard.

Questions to a hosted policy (`call`, e.g. the trace reader's `recall`) run on the actor's threads. A
method the policy lists in `concurrent_reads` only reads its state: such calls run at the same time as
each other (the query embedding and the HNSW search release the GIL), and only the pump, which folds new
events into that state, runs alone. The writes calls queue (a recall's `TraceRetrieved`) are appended by
one flusher thread, all that queued meanwhile in one append (group commit), after the answers have left.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import ray

from engram.actors.services import actor_services
from engram.config.home import Home
from engram.config.service import ServiceConfig
from engram.events.envelope import Appended, Write
from engram.events.store import decode_rows
from engram.kernel.gate import SharedExclusiveLock
from engram.policies.base import PolicyContext
from engram.policies.host import PolicyHost
from engram.policies.registry import policy_classes

log = logging.getLogger(__name__)

# How long one long-poll for new events waits at the shard before looping.
POLL_TIMEOUT_S = 1.0
# Longest wait between retries of a failing policy.
MAX_BACKOFF_S = 30.0
# After a batch shorter than the host's (or a wake-up by new events), wait this long before reading again
# so that new events gather: while the log grows steadily, every policy actor otherwise reads it (a query
# at the shard) for the handful of events appended since its last read.
POLICY_LINGER_S = 0.05
# Woken by events none of the hosted policies reads (a recall's TraceRetrieved, for the summarizers), the long poll
# waits this much longer for one they read before it moves the positions on: such an actor wakes a few times a second
# at most, not at each of the appends it never reads (each wake-up is a round trip, a position write, a new poll).
# Events the policies read but list as `unhurried` (TraceRetrieved, for those that only fold it) wake it as late.
# A second (issue 27): under a recall load each of the eight actors that never answer a recall woke four times a second
# (a long poll returned, positions moved, a new poll; for the unhurried readers a read of the log and a fold as well).
# What they decide is the same (in log order); a read after a position has them fold up to it first (`reach`), and
# waiting for idle nudges them (`EventStore.nudge`).
UNREAD_LINGER_S = 1.0


class HostedCalls:
    """Questions to the policies of one `PolicyHost` on many threads (what a PolicyActor runs; plain Python).

    `lock` is held exclusively by the pump (folding new events changes the policies' state) and by calls to
    methods a policy does not list in `concurrent_reads`; calls to the listed, read-only methods hold it shared
    and run at the same time. Writes the calls queue (`take_writes`) are appended by one flusher thread, all
    the calls' writes that queued meanwhile in one append, and folded right after.
    """

    def __init__(self, host: PolicyHost, shard: int = 0):
        self.host = host
        self.shard = shard
        self.lock = SharedExclusiveLock()
        self.own_seq = 0  # the last seq appended for the calls' writes
        self._cond = threading.Condition()
        self._queued = 0  # calls that queued writes ...
        self._flushed = 0  # ... and how many of them have their writes appended
        self._targets: set = set()
        self._stopping = False
        self.appends = 0  # appends the flusher made (each one for every call that queued meanwhile)
        self._flusher = threading.Thread(target=self._flush_loop, name="policy-call-writes", daemon=True)
        self._flusher.start()

    def call(self, policy: str, method: str, *args, min_position: int | None = None, **kwargs):
        """Ask a hosted policy a question.

        `min_position`: first catch up with the log up to that seq (read-your-writes). The writes earlier calls
        queued (e.g. a recall's `TraceRetrieved`) are appended after their answers have left; a call with a
        `min_position` first waits until those queued before it are appended and folded, so a caller sees its
        previous calls' effects. Without one (None or 0: whatever is folded now will do, e.g. the memory proxy's
        recall) a call waits for nothing but the fold in progress.
        """
        target = next((p for p in self.host.policies if p.name == policy), None)
        if target is None:
            raise ValueError(f"no policy {policy!r} here; hosted: {[p.name for p in self.host.policies]}")
        if min_position:
            with self._cond:
                before = self._queued
                self._cond.wait_for(lambda: self._flushed >= before)
                wanted = max(min_position, self.own_seq)
            if self.host.position < wanted:
                self.catch_up(wanted)
        concurrent = method in getattr(target, "concurrent_reads", ())
        with (self.lock.shared() if concurrent else self.lock.exclusive()):
            result = getattr(target, method)(*args, **kwargs)
        if hasattr(target, "take_writes"):
            with self._cond:
                self._queued += 1
                self._targets.add(target)
                self._cond.notify_all()
        return result

    def catch_up(self, wanted: int) -> None:
        """Fold the log up to `wanted` now (several waiting calls: the first one pumps, the others find it done)."""
        with self.lock.exclusive():
            while self.host.position < wanted:
                before = self.host.position
                if self.host.pump() == 0 or (self.host.errors and self.host.position == before):
                    break

    def _flush_loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queued > self._flushed or self._stopping)
                if self._queued == self._flushed:
                    return  # stopping, nothing left
                upto, targets = self._queued, list(self._targets)
            try:
                writes = [w for target in targets for w in target.take_writes()]
                if writes:
                    appended = self.host.append(writes)
                    self.appends += 1
                    seqs = [s for a in appended for s in a.seqs]
                    if seqs:
                        self.own_seq = max(self.own_seq, max(seqs))
                        # Folded now, between calls, rather than by the next fresh call: straight from what was
                        # written when nothing else came between (no read back from the shard), else from the log.
                        with self.lock.exclusive():
                            folded = self.host.fold_written(writes, appended, self.shard)
                        if not folded:
                            self.catch_up(self.own_seq)
            except Exception:
                log.exception("appending the writes of calls failed")
            with self._cond:
                self._flushed = upto
                self._cond.notify_all()

    def stop(self, timeout: float = 10.0) -> None:
        """Append what is queued, then end the flusher."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._flusher.join(timeout)


# Calls served at once: concurrent recalls of a trace reader, plus drains, status and pauses.
POLICY_ACTOR_CONCURRENCY = 12


# (Ray 2.60's typed overloads of `ray.remote(**options)` list a task's options only, not an actor's.)
@ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=POLICY_ACTOR_CONCURRENCY)  # type: ignore[call-overload]
class PolicyActor:
    def __init__(self, config_json: dict, shard_actor_name: str, shard: int, specs: list[str], member: int, members: int,
                 embedder_actor: str | None = None):
        config = ServiceConfig.model_validate(config_json)
        home = Home(config.home, config.shards)
        # Any: Ray 2.60 types an `ActorHandle`'s methods only through `ActorHandle[T]` with `@ray.method` declarations
        # (its `__getattr__` is `Never`); the ShardActor declares none, so its calls (`.head.remote()`) are untyped.
        self.shard_handle: Any = ray.get_actor(shard_actor_name)
        services = actor_services(config, embedder_actor)
        # Rows cross from the shard undecoded and are decoded here: cheaper to send, and the shard's
        # process (its log, its projections) does not decode for every consumer.
        read = lambda after, **kw: decode_rows(ray.get(self.shard_handle.read_rows.remote(after, **kw)), shard)

        def append(writes: list[Write]) -> list[Appended]:
            return ray.get(self.shard_handle.append_many.remote(writes))

        ctx = PolicyContext(shard=shard, home=home, services=services, member=member, members=members,
                            read=read, append=append)
        policies = [cls(ctx) for cls in policy_classes(specs)]
        self.host = PolicyHost(
            policies,
            read=read,
            append=append,
            head=lambda: ray.get(self.shard_handle.head.remote()),
            state_dir=home.root / "state",
        )
        self.calls = HostedCalls(self.host, shard)
        # What Ray names this process in its logs (`:actor_name:` at the top of the worker's log, the prefix of each
        # line): which policies, shard and member, so that a process's CPU can be told apart (bench/serve.py).
        self._name = (f"PolicyActor({'+'.join(p.name for p in self.host.policies)} shard {shard} "
                      f"member {member}/{members})")
        self._lock = self.calls.lock  # the pump runs alone; read-only calls alongside each other
        self._stop = threading.Event()
        self._resume_at = 0.0  # monotonic time until which the loop is paused (a forget under way)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return getattr(self, "_name", "PolicyActor")

    def _loop(self) -> None:
        backoff = 0.0
        interests, prompt = self.host.interests(), self.host.prompt_interests()
        skip_pump = False
        while not self._stop.is_set():
            if time.monotonic() < self._resume_at:
                self._stop.wait(0.05)
                continue
            try:
                with self._lock.exclusive():
                    # After a wake-up by events of no interest (below), straight back to waiting: no pump, which
                    # would ask the shard for its head and read whatever came meanwhile.
                    n = 0 if skip_pump else self.host.pump()
                    # Live time for the policies that record it (clock ticks); cheap when no boundary passed.
                    self.host.wall_clock(int(time.time() * 1_000_000))
                skip_pump = False
                if self.host.errors:
                    # A failing policy (e.g. an unreachable LLM) is retried, but not in a hot loop.
                    backoff = min(MAX_BACKOFF_S, max(0.5, backoff * 2))
                    self._stop.wait(backoff)
                    continue
                backoff = 0.0
                # After a batch of unhurried events only (a recall's TraceRetrieved, for working memory, the reflector
                # and the consolidator), the long poll's linger, not POLICY_LINGER_S: under a recall load such an
                # actor otherwise read the log (a head and a read at the shard) and appended its answer some twenty
                # times a second, each time for the one or two recalls recorded meanwhile.
                if n == 0 or (n < self.host.batch and not self.host.prompted):
                    position = self.host.position
                    interesting, head = ray.get(self.shard_handle.wait_for.remote(position + 1, interests, POLL_TIMEOUT_S,
                                                                                    UNREAD_LINGER_S, prompt))
                    if head <= position:
                        with self._lock.exclusive():  # nothing new for a while: what is unsaved is written now
                            self.host.save_pending()
                        # And straight back to waiting: a pump would only ask the shard for the head it just gave
                        # (an idle home's eight policy actors asked it every POLL_TIMEOUT_S, beside their long poll).
                        skip_pump = True
                    elif not interesting:
                        # Events none of these policies reads (e.g. a recall's TraceRetrieved for the summarizers),
                        # gathered for UNREAD_LINGER_S at the shard: the positions move on without reading the log.
                        with self._lock.exclusive():
                            self.host.seen_through(head)
                        skip_pump = True
                    elif head <= self.host.position:
                        skip_pump = True  # folded meanwhile (the calls' own writes, see HostedCalls): nothing to read
                elif n < self.host.batch:
                    self._stop.wait(POLICY_LINGER_S)
            except Exception:
                log.exception("policy loop failed; retrying")
                self._stop.wait(1.0)

    def call(self, request: tuple[str, str, tuple, dict]):
        """Ask a hosted policy a question (e.g. the trace reader's `recall`): `HostedCalls.call`, with `request` =
        (policy, method, positional arguments, keyword arguments; `min_position` among them).

        One argument, not the question's own: Ray serializes each argument of a call, and each keyword's name
        and value, on its own (a recall's dozen keywords: some twenty objects, each serialized by the caller and
        deserialized here). Packed, an actor call cost 0.46-0.52 ms of the caller's CPU and 0.50-0.55 ms of the actor's
        against 0.61-0.66 and 0.70-0.81 (a local Ray instance, 2,000 calls each way, a recall's arguments)."""
        policy, method, args, kwargs = request
        return self.calls.call(policy, method, *args, **kwargs)

    def reach(self, seq: int) -> tuple[int, int]:
        """Handle the log up to `seq` now, if not yet (a read after a write, `Runtime.reach`): (the hosted policies'
        position, the shard's head after it, which covers what they appended for it). A position past the head (a
        token of another home, or of a shard since re-sharded) is waited for up to the head only."""
        head = ray.get(self.shard_handle.head.remote())
        if self.host.position < min(seq, head):
            self.calls.catch_up(min(seq, head))
        return self.host.position, ray.get(self.shard_handle.head.remote())

    def drain(self) -> int:
        """Handle everything in the log now (synchronously); returns events read."""
        with self._lock.exclusive():
            return self.host.run_until_caught_up()

    # A forget (engram.shard.forget) pauses the loop; it resumes by itself if the forget never comes back.
    def pause(self, max_seconds: float = 600.0) -> bool:
        self._resume_at = time.monotonic() + max_seconds
        with self._lock.exclusive():  # wait for a pump (or a call) in progress
            pass
        return True

    def resume(self) -> bool:
        self._resume_at = 0.0
        return True

    def discard_snapshots(self) -> bool:
        with self._lock.exclusive():
            self.host.discard_snapshots()
        return True

    def scrub(self, texts: list[str]) -> list[str]:
        with self._lock.exclusive():
            return self.host.scrub(texts)

    def positions(self) -> dict:
        """The hosted policies' positions (what waiting for idle looks at; `status` reports more)."""
        return self.host.positions()

    def status(self) -> dict:
        return {"positions": self.host.positions(), "errors": dict(self.host.errors), "rebuilt": dict(self.host.rebuilt),
                "timings": self.host.timings.report()}

    def where(self) -> dict:
        from engram.actors.services import where

        return where()

    def close(self) -> bool:
        self._stop.set()
        self._thread.join(timeout=10)
        self.calls.stop()
        with self._lock.exclusive():
            self.host.save()
        return True

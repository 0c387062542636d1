"""The policy actor: a process that hosts policy groups for one shard (a member of each group's pool, or several
groups and all their members: `engram.policies.registry.processes`) and keeps each group caught up with the log by
long-polling the shard actor, each on a thread of its own. The long poll names the event types the
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

    def flush(self) -> None:
        """Append (and fold) now every write the calls so far left with the policies: those counted as queued and those
        of a call that has answered but not yet counted its own (its writes are in its policy's outbox as soon as it
        has answered). A forget's pause and drain run it (`drain`): the records of the recalls answered before are in
        the log when the forget plans its erasure, which finds and erases those that retrieved what it forgets."""
        with self._cond:
            if self._stopping:  # stopped: its last round appended what was left (no flusher to wait for)
                return
            self._targets.update(p for p in self.host.policies if hasattr(p, "take_writes"))
            self._queued += 1  # one more flusher round, whatever was counted
            before = self._queued
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._flushed >= before)

    def drain(self) -> int:
        """Handle everything in the log now, then `flush`: what the calls answered so far is in the log when this
        returns, also a record the flusher had taken and not yet appended (a forget plans its erasure right after its
        policies drain: a recall's record appended later would not be found, nor erased). Returns events read."""
        with self.lock.exclusive():
            read = self.host.run_until_caught_up()
        self.flush()
        return read

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


def slot_key(group: str, member: int) -> str:
    """How a policy actor names one of the group members it hosts (the first argument of its methods)."""
    return f"{group}-{member:03d}"


class HostedMember:
    """One group member in a policy process: its policies' host, the questions asked of them (`HostedCalls`), and the
    loop on a thread of its own that keeps them caught up with the log. Plain Python over the shard's handle."""

    def __init__(self, host: PolicyHost, shard_handle: Any, shard: int, name: str):
        self.host = host
        self.shard_handle = shard_handle
        self.name = name
        self.calls = HostedCalls(host, shard)
        self.lock = self.calls.lock  # the pump runs alone; read-only calls alongside each other
        self.stop_event = threading.Event()
        self.resume_at = 0.0  # monotonic time until which the loop is paused (a forget under way)
        self.closed = False
        self.thread = threading.Thread(target=self._loop, name=f"policy-loop {name}", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        backoff = 0.0
        interests, prompt = self.host.interests(), self.host.prompt_interests()
        skip_pump = False
        while not self.stop_event.is_set():
            if time.monotonic() < self.resume_at:
                self.stop_event.wait(0.05)
                continue
            try:
                with self.lock.exclusive():
                    # After a wake-up by events of no interest (below), straight back to waiting: no pump, which
                    # would ask the shard for its head and read whatever came meanwhile.
                    n = 0 if skip_pump else self.host.pump()
                    # Live time for the policies that record it (clock ticks); cheap when no boundary passed.
                    self.host.wall_clock(int(time.time() * 1_000_000))
                skip_pump = False
                if self.host.errors:
                    # A failing policy (e.g. an unreachable LLM) is retried, but not in a hot loop.
                    backoff = min(MAX_BACKOFF_S, max(0.5, backoff * 2))
                    self.stop_event.wait(backoff)
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
                        with self.lock.exclusive():  # nothing new for a while: what is unsaved is written now
                            self.host.save_pending()
                        # And straight back to waiting: a pump would only ask the shard for the head it just gave
                        # (an idle home's policy actors asked it every POLL_TIMEOUT_S, beside their long poll).
                        skip_pump = True
                    elif not interesting:
                        # Events none of these policies reads (e.g. a recall's TraceRetrieved for the summarizers),
                        # gathered for UNREAD_LINGER_S at the shard: the positions move on without reading the log.
                        with self.lock.exclusive():
                            self.host.seen_through(head)
                        skip_pump = True
                    elif head <= self.host.position:
                        skip_pump = True  # folded meanwhile (the calls' own writes, see HostedCalls): nothing to read
                elif n < self.host.batch:
                    self.stop_event.wait(POLICY_LINGER_S)
            except Exception:
                log.exception("policy loop of %s failed; retrying", self.name)
                self.stop_event.wait(1.0)

    def close(self) -> None:
        """Stop the loop, append what the calls queued, save the policies' state. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.stop_event.set()
        self.thread.join(timeout=10)
        self.calls.stop()
        with self.lock.exclusive():
            self.host.save()


# (Ray 2.60's typed overloads of `ray.remote(**options)` list a task's options only, not an actor's.)
@ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=POLICY_ACTOR_CONCURRENCY)  # type: ignore[call-overload]
class PolicyActor:
    """A policy process. `members`: (group, policy specs, member, members) of each group member it hosts; every method
    but `where` names the one it is for (`slot_key`), which the runtime's handle of that member passes (`MemberHandle`).
    The members share the process's services (the embedder's client, the LLM clients) and its connection to the
    shard; each has its own host, positions, snapshots and loop, as it had in a process of its own."""

    def __init__(self, config_json: dict, shard_actor_name: str, shard: int, members: list[tuple[str, list[str], int, int]],
                 embedder_actor: str | None = None):
        config = ServiceConfig.model_validate(config_json)
        home = Home(config.home, config.shards)
        # Any: Ray 2.60 types an `ActorHandle`'s methods only through `ActorHandle[T]` with `@ray.method` declarations
        # (its `__getattr__` is `Never`); the ShardActor declares none, so its calls (`.head.remote()`) are untyped.
        shard_handle: Any = ray.get_actor(shard_actor_name)
        services = actor_services(config, embedder_actor)
        # Rows cross from the shard undecoded and are decoded here: cheaper to send, and the shard's
        # process (its log, its projections) does not decode for every consumer.
        read = lambda after, **kw: decode_rows(ray.get(shard_handle.read_rows.remote(after, **kw)), shard)

        def append(writes: list[Write]) -> list[Appended]:
            return ray.get(shard_handle.append_many.remote(writes))

        def head() -> int:
            return ray.get(shard_handle.head.remote())

        self.shard_handle = shard_handle
        self.members: dict[str, HostedMember] = {}
        for group, specs, member, count in members:
            ctx = PolicyContext(shard=shard, home=home, services=services, member=member, members=count,
                                read=read, append=append)
            host = PolicyHost([cls(ctx) for cls in policy_classes(specs)], read=read, append=append, head=head,
                              state_dir=home.root / "state")
            name = f"{'+'.join(p.name for p in host.policies)} shard {shard} member {member}/{count}"
            self.members[slot_key(group, member)] = HostedMember(host, shard_handle, shard, name)
        # What Ray names this process in its logs (`:actor_name:` at the top of the worker's log, the prefix of each
        # line): which policies, shard and members, so that a process's CPU can be told apart (bench/serve.py).
        self._name = f"PolicyActor({'; '.join(m.name for m in self.members.values())})"

    def __repr__(self) -> str:
        return getattr(self, "_name", "PolicyActor")

    def call(self, slot: str, request: tuple[str, str, tuple, dict]):
        """Ask a hosted policy a question (e.g. the trace reader's `recall`): `HostedCalls.call`, with `request` =
        (policy, method, positional arguments, keyword arguments; `min_position` among them).

        One argument, not the question's own: Ray serializes each argument of a call, and each keyword's name
        and value, on its own (a recall's dozen keywords: some twenty objects, each serialized by the caller and
        deserialized here). Packed, an actor call cost 0.46-0.52 ms of the caller's CPU and 0.50-0.55 ms of the actor's
        against 0.61-0.66 and 0.70-0.81 (a local Ray instance, 2,000 calls each way, a recall's arguments)."""
        policy, method, args, kwargs = request
        return self.members[slot].calls.call(policy, method, *args, **kwargs)

    def reach(self, slot: str, seq: int) -> tuple[int, int]:
        """Handle the log up to `seq` now, if not yet (a read after a write, `Runtime.reach`): (the hosted policies'
        position, the shard's head after it, which covers what they appended for it). A position past the head (a
        token of another home, or of a shard since re-sharded) is waited for up to the head only."""
        hosted = self.members[slot]
        head = ray.get(self.shard_handle.head.remote())
        if hosted.host.position < min(seq, head):
            hosted.calls.catch_up(min(seq, head))
        return hosted.host.position, ray.get(self.shard_handle.head.remote())

    def drain(self, slot: str) -> int:
        """Handle everything in the log now (synchronously); returns events read."""
        return self.members[slot].calls.drain()

    # A forget (engram.shard.forget) pauses the loop; it resumes by itself if the forget never comes back.
    def pause(self, slot: str, max_seconds: float = 600.0) -> bool:
        hosted = self.members[slot]
        hosted.resume_at = time.monotonic() + max_seconds
        with hosted.lock.exclusive():  # wait for a pump (or a call) in progress
            pass
        hosted.calls.flush()  # what the calls answered so far recorded (a recall's query, its traces) is in the log
        return True

    def resume(self, slot: str) -> bool:
        self.members[slot].resume_at = 0.0
        return True

    def discard_snapshots(self, slot: str) -> bool:
        hosted = self.members[slot]
        with hosted.lock.exclusive():
            hosted.host.discard_snapshots()
        return True

    def scrub(self, slot: str, texts: list[str]) -> list[str]:
        hosted = self.members[slot]
        with hosted.lock.exclusive():
            return hosted.host.scrub(texts)

    def positions(self, slot: str) -> dict:
        """The hosted policies' positions (what waiting for idle looks at; `status` reports more)."""
        return self.members[slot].host.positions()

    def status(self, slot: str) -> dict:
        host = self.members[slot].host
        return {"positions": host.positions(), "errors": dict(host.errors), "rebuilt": dict(host.rebuilt),
                "timings": host.timings.report()}

    def where(self, slot: str | None = None) -> dict:
        from engram.actors.services import where

        return where()

    def close(self, slot: str | None = None) -> bool:
        """Close one hosted member (None: all of them): its loop ends, its queued writes are appended, its state
        saved."""
        closing = [hosted for key, hosted in self.members.items() if slot is None or key == slot]
        for hosted in closing:  # every loop told first: their long polls end together, not one after another
            hosted.stop_event.set()
        for hosted in closing:
            hosted.close()
        return True


class MemberHandle:
    """The runtime's handle of one group member hosted by a `PolicyActor`: its methods are the actor's, called with
    the member's `slot_key` first (`handle.reach.remote(seq)` is `actor.reach.remote(slot, seq)`). `actor` is the
    process's own handle (to end it), shared by the handles of every member it hosts."""

    def __init__(self, actor: Any, slot: str):
        self.actor = actor
        self.slot = slot

    def __getattr__(self, name: str) -> "_MemberMethod":
        if name.startswith("__"):
            raise AttributeError(name)
        return _MemberMethod(getattr(self.actor, name), self.slot)


class _MemberMethod:
    def __init__(self, method: Any, slot: str):
        self._method = method
        self._slot = slot

    def remote(self, *args, **kwargs):
        return self._method.remote(self._slot, *args, **kwargs)

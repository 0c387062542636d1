"""The policy actor: hosts a group of policies for one shard (one pool member) and keeps them
caught up with the log by long-polling the shard actor."""

from __future__ import annotations

import logging
import threading
import time

import ray

from engram.config.service import ServiceConfig
from engram.events.store import decode_rows
from engram.home import Home
from engram.policies.base import PolicyContext
from engram.policies.host import PolicyHost
from engram.policies.registry import policy_classes
from engram.actors.services import actor_services

log = logging.getLogger(__name__)

# How long one long-poll for new events waits at the shard before looping.
POLL_TIMEOUT_S = 1.0
# Longest wait between retries of a failing policy.
MAX_BACKOFF_S = 30.0
# After a batch shorter than the host's (or a wake-up by new events), wait this long before reading again
# so that new events gather: while the log grows steadily, every policy actor otherwise reads it (a query
# at the shard) for the handful of events appended since its last read.
POLICY_LINGER_S = 0.05


@ray.remote(max_restarts=-1, max_task_retries=-1, max_concurrency=4)
class PolicyActor:
    def __init__(self, config_json: dict, shard_actor_name: str, shard: int, specs: list[str], member: int, members: int,
                 embedder_actor: str | None = None):
        config = ServiceConfig.model_validate(config_json)
        home = Home(config.home, config.shards)
        self.shard_handle = ray.get_actor(shard_actor_name)
        services = actor_services(config, embedder_actor)
        # Rows cross from the shard undecoded and are decoded here: cheaper to send, and the shard's
        # process (its log, its projections) does not decode for every consumer.
        read = lambda after, **kw: decode_rows(ray.get(self.shard_handle.read_rows.remote(after, **kw)), shard)
        append = lambda writes: ray.get(self.shard_handle.append_many.remote(writes))
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
        self._lock = threading.Lock()  # one pump at a time: a logical actor's mailbox is serial
        self._flushing: threading.Thread | None = None
        self._own_seq = 0
        self._stop = threading.Event()
        self._resume_at = 0.0  # monotonic time until which the loop is paused (a forget under way)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            if time.monotonic() < self._resume_at:
                self._stop.wait(0.05)
                continue
            try:
                with self._lock:
                    n = self.host.pump()
                    # Live time for the policies that record it (clock ticks); cheap when no boundary passed.
                    self.host.wall_clock(int(time.time() * 1_000_000))
                if self.host.errors:
                    # A failing policy (e.g. an unreachable LLM) is retried, but not in a hot loop.
                    backoff = min(MAX_BACKOFF_S, max(0.5, backoff * 2))
                    self._stop.wait(backoff)
                    continue
                backoff = 0.0
                if n == 0 and not ray.get(self.shard_handle.wait.remote(self.host.position + 1, POLL_TIMEOUT_S)):
                    with self._lock:  # nothing new for a while: what is unsaved is written now
                        self.host.save_pending()
                elif n < self.host.batch:
                    self._stop.wait(POLICY_LINGER_S)
            except Exception:
                log.exception("policy loop failed; retrying")
                self._stop.wait(1.0)

    def call(self, policy: str, method: str, *args, min_position: int | None = None, **kwargs):
        """Ask a hosted policy a question (e.g. the trace reader's `recall`), on the policy's serial mailbox.

        `min_position`: first catch up with the log up to that seq (read-your-writes). Writes the call
        queued (the policy's `take_writes`, e.g. a `TraceRetrieved`) are appended after the answer has
        left, and the next call sees them folded.
        """
        target = next((p for p in self.host.policies if p.name == policy), None)
        if target is None:
            raise ValueError(f"no policy {policy!r} here; hosted: {[p.name for p in self.host.policies]}")
        flushing = self._flushing
        if flushing is not None:
            flushing.join()
        with self._lock:
            wanted = max(min_position or 0, self._own_seq)
            if self.host.position < wanted:
                self.host.run_until_caught_up()
            result = getattr(target, method)(*args, **kwargs)
        if hasattr(target, "take_writes"):
            # Started before it is published: a concurrent call joins it, and a thread not yet started cannot be joined.
            flusher = threading.Thread(target=self._flush, args=(target,), daemon=True)
            flusher.start()
            self._flushing = flusher
        return result

    def _flush(self, target) -> None:
        try:
            writes = target.take_writes()
            if writes:
                appended = self.host.append(writes)
                self._own_seq = max([self._own_seq] + [s for a in appended for s in a.seqs])
        except Exception:
            log.exception("appending the writes of a call failed")

    def drain(self) -> int:
        """Handle everything in the log now (synchronously); returns events read."""
        with self._lock:
            return self.host.run_until_caught_up()

    # A forget (engram.forgetting) pauses the loop; it resumes by itself if the forget never comes back.
    def pause(self, max_seconds: float = 600.0) -> bool:
        self._resume_at = time.monotonic() + max_seconds
        with self._lock:  # wait for a pump in progress
            pass
        return True

    def resume(self) -> bool:
        self._resume_at = 0.0
        return True

    def discard_snapshots(self) -> bool:
        with self._lock:
            self.host.discard_snapshots()
        return True

    def scrub(self, texts: list[str]) -> list[str]:
        with self._lock:
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
        with self._lock:
            self.host.save()
        return True

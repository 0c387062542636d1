"""Driving policies over one shard's log: read new events, let each policy decide, append.

Plain class; `engram.actors.policy` runs it in a Ray actor with a long-poll loop.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Callable, Sequence

from engram.events.envelope import Appended, Recorded, Write
from engram.kernel.collector import collector_paused
from engram.kernel.files import atomic_write
from engram.kernel.timing import StageTimings
from engram.policies.base import IncompatibleSnapshot, LlmUnavailable, Policy

log = logging.getLogger(__name__)

# While a host is busy, its snapshots (and position sidecars) are written at most this often; when it
# is idle (its shell calls `save_pending`), after `run_until_caught_up`, and when it closes, at once.
# A snapshot only spares a restarted host work (it handles the events after its snapshot again, and
# the log refuses the repeated appends by their ids), while pickling the whole state after every
# batch cost a growing share of a long ingest.
SNAPSHOT_INTERVAL_S = 2.0
# ...and at most this share of a busy host's time goes to them: after a save that took t seconds, the
# next one waits at least t / SNAPSHOT_SHARE - t (a large memory pickles in a second on a loaded machine,
# which every 2 s was a third of the consolidation actor's time on LoCoMo dev).
SNAPSHOT_SHARE = 0.1


class PolicyHost:
    def __init__(
        self,
        policies: Sequence[Policy],
        *,
        read: Callable[..., list[Recorded]],
        append: Callable[[list[Write]], list[Appended]],
        head: Callable[[], int],
        state_dir: Path | None,
        batch: int = 5_000,
    ):
        self.policies = list(policies)
        self._read = read
        self._append = append
        self._head = head
        self.state_dir = state_dir
        self.batch = batch
        self.errors: dict[str, str] = {}
        # Policies whose snapshot could not be restored and that rebuild their state from the log, and why.
        self.rebuilt: dict[str, str] = {}
        # What each policy's snapshot file holds, as a digest (the bytes themselves would keep a second, serialised copy
        # of every policy's state in memory: at a thousand agents, hundreds of MB), and each position sidecar's bytes.
        self._saved: dict[str, bytes] = {}
        self._hold_snapshots = False  # a forget is under way: no snapshot is written until `scrub`
        # Per policy: decide (handle), append and snapshot seconds, events handled; "(log)": reading.
        self.timings = StageTimings()
        # Whether the last `pump` read an event of `prompt_interests` (not only `unhurried` ones): the actor's loop reads
        # again soon after such a batch, and after one of unhurried events only waits as for those (UNREAD_LINGER_S).
        self.prompted = True
        self._prompt = frozenset(kinds) if (kinds := self.prompt_interests()) is not None else None
        self.snapshot_interval_s = SNAPSHOT_INTERVAL_S
        self._unsaved: bool | None = None  # True: states and positions to write; False: positions only
        self._save_cost = 0.0  # seconds the last save while busy took
        self._saved_at = time.monotonic()
        for i, p in enumerate(self.policies):
            path = self._snapshot_path(p)
            if path is None or not path.exists():
                continue
            try:
                data = path.read_bytes()
                p.load_snapshot(data)
                self._saved[p.name] = _digest(data)
            except Exception as exc:  # IncompatibleSnapshot, or a restore that failed half-way
                reason = str(exc) if isinstance(exc, IncompatibleSnapshot) else f"restoring failed: {exc!r}"
                log.warning("policy %s: snapshot %s not restored (%s); rebuilding its state from the log",
                            p.name, path.name, reason)
                self.policies[i] = type(p)(p.ctx)  # a fresh instance: nothing of the failed restore is kept
                self.rebuilt[p.name] = reason

    def _snapshot_path(self, p: Policy) -> Path | None:
        if self.state_dir is None:
            return None
        return self.state_dir / f"{p.name}.shard-{p.ctx.shard:03d}.member-{p.ctx.member:03d}.pickle"

    @property
    def position(self) -> int:
        return min((p.position for p in self.policies), default=0)

    def _interests(self) -> list[str] | None:
        kinds: set[str] = set()
        for p in self.policies:
            if p.interests is None:
                return None
            kinds |= p.interests
        return sorted(kinds)

    def pump(self) -> int:
        """Handle one batch of new events; returns how many events were read (0 when caught up)."""
        after = self.position
        head = self._head()
        if head <= after:
            return 0
        with collector_paused():  # the batch decoded and handled with the collector off (engram.kernel.collector)
            with self.timings.measure("(log)", "read"):
                chunk = self._read(after, limit=self.batch, to_seq=head, types=self._interests())
            self.timings.add("(log)", "events", len(chunk))
            prompt = self._prompt
            self.prompted = bool(chunk) and (prompt is None or any(r.type in prompt for r in chunk))
            # A short chunk means everything up to `head` was read: events of no interest count as seen.
            reached = head if len(chunk) < self.batch else chunk[-1].seq
            return self._fold(chunk, reached)

    def fold_written(self, writes: Sequence[Write], appended: Sequence[Appended], shard: int = 0) -> bool:
        """Fold what this host has just appended (`writes`, the log's answer `appended`) without reading it back,
        when those events are exactly the next ones of the log for every hosted policy (nothing else came between:
        their seqs follow every position without a gap, and none was in the log before). Returns whether it did;
        if not, the caller pumps as usual. The events are the log's as it would read them (same seqs, stream
        versions, times, ids and causes)."""
        if not writes or len(writes) != len(appended):
            return False
        records = []
        for w, a in zip(writes, appended):
            if a.duplicates or len(a.seqs) != len(w.events):
                return False
            first_version = a.stream_version - len(w.events) + 1
            for k, (item, seq) in enumerate(zip(w.events, a.seqs)):
                records.append(Recorded(seq, w.stream, first_version + k, w.agent, item.ts_us, item.event,
                                        item.causation, item.event_id, shard))
        records.sort(key=lambda r: r.seq)
        start = self.position
        if any(p.position != start for p in self.policies):
            return False
        if [r.seq for r in records] != list(range(start + 1, start + 1 + len(records))):
            return False
        kinds = self._interests()
        chunk = [r for r in records if kinds is None or r.type in kinds]
        self.timings.add("(log)", "events", len(chunk))
        with collector_paused():
            self._fold(chunk, records[-1].seq)
        return True

    def _fold(self, chunk: list[Recorded], reached: int) -> int:
        """Let each policy handle its events of `chunk` (events through `reached` read): `pump`'s second half."""
        if not chunk:
            # Nothing of interest: only the positions move (their small sidecars are written; the
            # snapshots, which can be large, are not rewritten whenever other events arrive).
            for p in self.policies:
                p.position = max(p.position, reached)
            self._unsaved = bool(self._unsaved)
            self._save_when_due()
            return 0
        failed: set[int] = set()
        for part, upto in self._parts(chunk, reached):
            # Every policy, in the host's order, on this part: a policy hosted beside one that decides a long import
            # in parts moves with it (it waited for the whole import before, its position the slowest of all).
            for i in range(len(self.policies)):
                p = self.policies[i]
                if i in failed or p.position >= upto:
                    continue
                todo = [r for r in part if r.seq > p.position and (p.interests is None or r.type in p.interests)]
                if todo and not self._handle(i, p, todo, upto):
                    failed.add(i)  # rolled back: it handles this batch again later, from where its snapshot was
                    continue
                p.position = max(p.position, upto)
        self._unsaved = True
        self._save_when_due()
        return len(chunk)

    def _parts(self, chunk: list[Recorded], reached: int) -> list[tuple[list[Recorded], int]]:
        """The chunk as (events, position after them): in parts of the smallest `handle_batch` of the hosted
        policies (one part when none has one); the last part ends at `reached`."""
        step = min((p.handle_batch for p in self.policies if p.handle_batch), default=None)
        if step is None or len(chunk) <= step:
            return [(chunk, reached)]
        parts = [chunk[start : start + step] for start in range(0, len(chunk), step)]
        return [(part, part[-1].seq) for part in parts[:-1]] + [(parts[-1], reached)]

    def _handle(self, i: int, p: Policy, todo: list[Recorded], reached: int) -> bool:
        """Let `p` decide on `todo`, at most `p.handle_batch` events per call: each part's writes are appended,
        and the policy's position moved past the part, before the next part is decided, so the stages that
        read them start on them and the progress of a long ingest shows it is under way. False if it failed
        (it is rolled back to its last snapshot and handles the events again later)."""
        step = p.handle_batch or len(todo)
        for start in range(0, len(todo), step):
            part = todo[start : start + step]
            try:
                with self.timings.measure(p.name, "decide"):
                    writes = p.handle(part)
            except Exception as exc:  # one failing policy must not stop the others; it retries later
                if isinstance(exc, LlmUnavailable):
                    log.warning("policy %s waits for the LLM (events from seq %s): %s", p.name, part[0].seq, exc)
                else:
                    log.exception("policy %s failed at seq %s", p.name, part[0].seq)
                self.errors[p.name] = repr(exc)
                self._roll_back(i, p)
                return False
            self.timings.add(p.name, "events", len(part))
            if writes:
                with self.timings.measure(p.name, "append"):
                    self._append(writes)
            last = start + step >= len(todo)
            after = getattr(p, "after_batch", None)
            if after is not None:  # its writes are in the log: e.g. idle agents' memories may be evicted
                after(reached if last else part[-1].seq)
            if not last:
                p.position = max(p.position, part[-1].seq)
        self.errors.pop(p.name, None)
        return True

    def interests(self) -> list[str] | None:
        """The event types some hosted policy reads (None: every type)."""
        return self._interests()

    def prompt_interests(self) -> list[str] | None:
        """Of `interests`, the types that wake the host at once: those some hosted policy reads and does not list as
        `unhurried` (None: every type)."""
        kinds: set[str] = set()
        for p in self.policies:
            if p.interests is None:
                return None
            kinds |= p.interests - p.unhurried
        return sorted(kinds)

    def seen_through(self, head: int) -> None:
        """The log says nothing up to `head` is of interest here: every position moves there without a read (as
        `pump` does for a chunk of no interest)."""
        if head <= self.position:
            return
        for p in self.policies:
            p.position = max(p.position, head)
        self._unsaved = bool(self._unsaved)
        self._save_when_due()

    def _roll_back(self, i: int, p: Policy) -> None:
        """After a failed batch, the policy's state as of its last snapshot: decisions it made in the failed batch
        but never appended are not remembered as made (the batch is handled again, its appends deduplicated)."""
        fresh = type(p)(p.ctx)
        path = self._snapshot_path(p)
        saved = path.read_bytes() if p.name in self._saved and path is not None and path.exists() else None
        if saved is not None:
            try:
                fresh.load_snapshot(saved)
            except Exception:  # cannot happen for bytes this host wrote; rebuilding from the log is the safe answer
                fresh = type(p)(p.ctx)
        self.policies[i] = fresh
    def _save_when_due(self) -> None:
        wait = max(self.snapshot_interval_s, self._save_cost / SNAPSHOT_SHARE - self._save_cost)
        if time.monotonic() - self._saved_at >= wait:
            started = time.monotonic()
            self.save_pending()
            self._save_cost = time.monotonic() - started

    def save_pending(self) -> None:
        """Write what changed since the last save: snapshots and positions, or positions only."""
        if self._unsaved is not None:
            self.save(snapshots=self._unsaved)

    def wall_clock(self, now_us: int) -> int:
        """Give the wall-clock time to the policies that record it (`on_wall_clock(now_us) -> writes`,
        e.g. the clock ticker's live ticks); the shell calls this, policies never read a clock.
        Returns the number of events appended."""
        appended = 0
        for p in self.policies:
            hook = getattr(p, "on_wall_clock", None)
            if hook is None:
                continue
            writes = hook(now_us)
            if writes:
                self._append(writes)
                appended += sum(len(w.events) for w in writes)
        return appended

    def append(self, writes: list[Write]) -> list[Appended]:
        """Append writes a policy produced outside `handle` (e.g. answering a call)."""
        return self._append(writes)

    def run_until_caught_up(self, max_rounds: int = 1_000_000) -> int:
        """Pump until every policy has handled the log, or a pump moved nobody forward (a policy is failing:
        `errors` says why; the caller tries again later, as the actor's loop does with a backoff)."""
        total = 0
        for _ in range(max_rounds):
            before = self.position
            n = self.pump()
            if n == 0:
                break
            total += n
            if self.errors and self.position == before:
                break
        self.save_pending()
        return total

    # ------------------------------------------------------------------ forgetting (engram.shard.forget)

    def pause(self) -> None:
        """Nothing to pause here: this host runs only when called (an actor pauses its loop)."""

    def resume(self) -> None:
        pass

    def discard_snapshots(self) -> None:
        """Delete this host's snapshots, and write none until `scrub`: a crash from here on restarts the
        policies from the (erased) log rather than from state that may hold forgotten text."""
        self._hold_snapshots = True
        for p in self.policies:
            path = self._snapshot_path(p)
            if path is not None:
                path.unlink(missing_ok=True)
            self._saved.pop(p.name, None)

    def drain(self) -> int:
        return self.run_until_caught_up()

    def scrub(self, texts: list[str]) -> list[str]:
        """Rebuild from the log every policy whose state still holds one of the forgotten `texts` (its own forget
        handling missed it), then write the snapshots again. Returns the names of the policies rebuilt."""
        from engram.events.erasure import search_terms

        terms = search_terms(texts)
        reset = []
        for i, p in enumerate(self.policies):
            if terms and _holds(p, terms):
                self.policies[i] = type(p)(p.ctx)
                self.rebuilt[p.name] = "its state held forgotten text after a forget"
                reset.append(p.name)
        if reset:
            self.run_until_caught_up()
            for p in self.policies:
                if _holds(p, terms):  # another discussion says the same words: they are its own
                    log.warning("policy %s, rebuilt from the erased log, holds text equal to a forgotten one", p.name)
        self._hold_snapshots = False
        self.save()
        return reset

    def save(self, snapshots: bool = True) -> None:
        if snapshots or not self._unsaved:
            self._unsaved = None
        for p in self.policies:
            path = self._snapshot_path(p)
            if path is not None:
                with self.timings.measure(p.name, "snapshot"):
                    data = p.snapshot() if snapshots and not self._hold_snapshots else None
                    if data is not None and self._saved.get(p.name) != (digest := _digest(data)):
                        atomic_write(path, data)  # (unchanged: not written, and fsynced, again)
                        self._saved[p.name] = digest
                # Beside it, the position alone, for `engram status` without unpickling anything.
                position = json.dumps(
                    {"policy": p.name, "shard": p.ctx.shard, "member": p.ctx.member, "members": p.ctx.members,
                     "position": p.position}).encode()
                if self._saved.get(f"{p.name}#position") != position:
                    atomic_write(path.with_suffix(".position.json"), position)
                    self._saved[f"{p.name}#position"] = position
        self._saved_at = time.monotonic()  # the interval runs from the end of a save

    def positions(self) -> dict[str, int]:
        return {p.name if p.ctx.members == 1 else f"{p.name}#{p.ctx.member}": p.position for p in self.policies}


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _holds(policy: Policy, terms: list[bytes]) -> bool:
    """Whether `policy`'s state (as a snapshot would hold it, written or not) contains one of `terms`."""
    import pickle

    data = pickle.dumps(policy.state(), protocol=pickle.HIGHEST_PROTOCOL)
    return any(t in data for t in terms)

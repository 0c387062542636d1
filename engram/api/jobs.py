"""Long operations (replay, verify, regenerate, forget) as jobs: start -> id; poll status, progress, result.

A job runs on a thread of the server; its record lives in memory for the life of the server (and
is forgotten with it: what a job did is in the log or the projections, not in the job).

Several replicas of one server (Ray Serve) each run their own jobs, but a client's next poll may reach
another replica: with `shared` (a directory of that server instance, `<home>/state/jobs/<instance>`), each
record is also published there as JSON (at each state change, and at most every PUBLISH_EVERY_S seconds of
progress), with the agents of the key that started it, and a job another replica runs is read from there.

A replica can die with jobs running (its process killed, its node lost): their published records would say
`running` forever. So each record names its owner (host, pid) and carries a lease that the owner's heartbeat
renews while the job is queued or running (every LEASE_S / 3). A reader on another replica sees such a job as
`failed` with the cause (`job_lost`) as soon as the owner's process is gone (same host), or once the lease has
run out (any host: a replica that is frozen or cut off). A server that stops with jobs still queued fails them
too ("the server stopped before the job ran"), rather than leaving them `queued`.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import msgspec

from engram.api import types as t
from engram.api.clock import iso, now_us
from engram.api.errors import error, translate

# Replays and regenerations are heavy: two at a time on this machine's two cores, the rest wait.
MAX_CONCURRENT_JOBS = 2
# Finished jobs kept for polling.
KEEP_FINISHED = 200
JOB_ID_PREFIX = "job-"
PUBLISH_EVERY_S = 0.5
# A running job's published record is renewed by its replica's heartbeat (every LEASE_S / 3); a record whose lease
# has run out (its replica frozen, or dead on another host) reads as failed.
LEASE_S = 30.0


class JobProgress:
    """What a running job reports: `advance(n)`, or `set(done, total)`."""

    def __init__(self, total: int, unit: str):
        self.done, self.total, self.unit = 0, total, unit
        self._lock = threading.Lock()
        self.on_change: Callable[[], None] = lambda: None

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
        self.on_change()

    def set(self, done: int, total: int | None = None, unit: str | None = None) -> None:
        """`unit`: a job of several stages counts another unit from here on (e.g. texts, then events)."""
        with self._lock:
            self.done = done
            if total is not None:
                self.total = total
            if unit is not None:
                self.unit = unit
        self.on_change()


class _Record:
    def __init__(self, job_id: str, kind: t.JobKind, progress: JobProgress):
        self.id, self.kind, self.progress = job_id, kind, progress
        self.state: t.JobState = "queued"
        self.created = now_us()
        self.finished: int | None = None
        self.result: dict[str, Any] | None = None
        self.error: t.ErrorBody | None = None
        self.followers_known = False  # whether `follow` said who may follow it:
        self.followers: frozenset[str] | None = None  # the agents of the key that started it (None: every agent)
        self.published = 0.0
        self.on_end: Callable[[], None] | None = None  # run once when the job ends, ran or not

    def ended(self) -> None:
        on_end, self.on_end = self.on_end, None
        if on_end is not None:
            on_end()

    def view(self) -> t.Job:
        p = self.progress
        return t.Job(id=self.id, kind=self.kind, state=self.state,
                     progress=t.Progress(done=p.done, total=p.total, unit=p.unit), created=iso(self.created),
                     finished=iso(self.finished) if self.finished else None, result=self.result, error=self.error)


class Jobs:
    def __init__(self, shared: Path | None = None, *, lease_s: float = LEASE_S):
        """`shared`: the directory the replicas of one server publish their jobs in (see the module docstring);
        `lease_s`: how long a published running job stays `running` without a heartbeat of its replica."""
        self._pool = ThreadPoolExecutor(max_workers=MAX_CONCURRENT_JOBS, thread_name_prefix="engram-job")
        self._jobs: dict[str, _Record] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._token = os.urandom(3).hex()
        self._shared = Path(shared) if shared is not None else None
        self._publishing = threading.Lock()
        self._owner = {"host": socket.gethostname(), "pid": os.getpid()}
        self._lease_s = lease_s
        self._closing = threading.Event()
        self._heartbeat: threading.Thread | None = None
        if self._shared is not None:
            self._shared.mkdir(parents=True, exist_ok=True)
            self._heartbeat = threading.Thread(target=self._renew_leases, name="engram-job-heartbeat", daemon=True)
            self._heartbeat.start()

    # ------------------------------------------------------------------ shared with other replicas

    def _publish(self, rec: _Record, force: bool = True) -> None:
        if self._shared is None:
            return
        now = time.monotonic()
        if not force and now - rec.published < PUBLISH_EVERY_S:
            return
        with self._publishing:  # the record read and written as one: the last write holds the latest state
            rec.published = now
            followers = rec.followers
            doc = {"job": msgspec.to_builtins(rec.view()), "known": rec.followers_known,
                   "followers": None if followers is None else sorted(followers),
                   "owner": self._owner, "lease_until": time.time() + self._lease_s}
            path = self._shared / f"{rec.id}.json"
            tmp = path.with_name(f".{rec.id}.tmp")
            tmp.write_bytes(msgspec.json.encode(doc))
            os.replace(tmp, path)

    def _renew_leases(self) -> None:
        """The heartbeat: republish every unfinished job of this replica before its lease runs out."""
        while not self._closing.wait(self._lease_s / 3):
            for rec in list(self._jobs.values()):
                if rec.state in ("queued", "running"):
                    try:
                        self._publish(rec)
                    except OSError:  # a full or vanished directory: the next beat tries again
                        pass

    def _published_job(self, doc: dict[str, Any]) -> t.Job:
        """A job another replica published, as it stands: failed when it is unfinished and its replica is gone."""
        job = msgspec.convert(doc["job"], t.Job)
        if job.state not in ("queued", "running"):
            return job
        cause = lost(doc.get("owner"), doc.get("lease_until"))
        if cause is None:
            return job
        return msgspec.structs.replace(job, state="failed", error=t.ErrorBody(
            code="job_lost", message=f"the server replica running this {job.kind} job {cause}; the job did not finish "
                                     "(what it completed is in the log): start it again"))

    def _published(self, job_id: str) -> dict[str, Any] | None:
        if self._shared is None:
            return None
        try:
            doc: dict[str, Any] = msgspec.json.decode((self._shared / f"{job_id}.json").read_bytes(), type=dict)
            return doc
        except (FileNotFoundError, msgspec.DecodeError):
            return None

    def follow(self, job_id: str, agents: frozenset[str] | None) -> None:
        """Record who may follow job `job_id`: the agents of the key that started it (None: every agent)."""
        rec = self._jobs.get(job_id)
        if rec is not None:
            rec.followers, rec.followers_known = agents, True
            self._publish(rec)

    def followers(self, job_id: str) -> tuple[bool, frozenset[str] | None]:
        """(known, agents): whether `follow` was called for the job (here or on another replica), and with what."""
        rec = self._jobs.get(job_id)
        if rec is not None:
            return rec.followers_known, rec.followers
        doc = self._published(job_id)
        if doc is None or not doc["known"]:
            return False, None
        return True, None if doc["followers"] is None else frozenset(doc["followers"])

    def start(self, kind: t.JobKind, total: int, unit: str, work: Callable[[JobProgress], dict[str, Any]],
              on_end: Callable[[], None] | None = None) -> t.Job:
        """Run `work(progress) -> result` in the background; its id to poll. `on_end` runs once when the job ends,
        also when the server stops before it ran (e.g. to let go of what the job holds)."""
        progress = JobProgress(total, unit)
        rec = _Record(f"{JOB_ID_PREFIX}{self._token}-{next(self._ids)}", kind, progress)
        rec.on_end = on_end
        progress.on_change = lambda: self._publish(rec, force=False)
        with self._lock:
            self._jobs[rec.id] = rec
            self._trim()
        self._publish(rec)

        def run() -> None:
            rec.state = "running"
            self._publish(rec)
            try:
                rec.result = work(progress)
                rec.state = "succeeded"
            except BaseException as exc:  # reported through the job, never lost
                api = translate(exc)
                rec.error = (t.ErrorBody(code=api.code, message=api.message) if api is not None
                             else t.ErrorBody(code="internal", message=f"{type(exc).__name__}: {exc}"))
                rec.state = "failed"
            finally:
                rec.finished = now_us()
                rec.ended()
                self._publish(rec)

        self._pool.submit(run)
        return rec.view()

    def get(self, job_id: str) -> t.Job:
        from engram.kernel.ids import InvalidIdError, validate_id

        try:
            validate_id(job_id, "job id")
        except InvalidIdError as exc:
            raise error("invalid_id", str(exc)) from None
        rec = self._jobs.get(job_id)
        if rec is not None:
            return rec.view()
        doc = self._published(job_id)  # run by another replica of this server
        if doc is None:
            raise error("unknown_job", f"no job {job_id!r} on this server (jobs live as long as the server)")
        return self._published_job(doc)

    def list(self) -> t.JobList:
        jobs = [r.view() for r in list(self._jobs.values())]
        if self._shared is not None:
            mine = {j.id for j in jobs}
            for path in sorted(self._shared.glob(f"{JOB_ID_PREFIX}*.json")):
                if path.stem not in mine and (doc := self._published(path.stem)) is not None:
                    jobs.append(self._published_job(doc))
            jobs.sort(key=lambda j: j.created)
        return t.JobList(jobs=jobs)

    def running(self) -> int:
        return sum(1 for r in list(self._jobs.values()) if r.state in ("queued", "running"))

    def wait(self, job_id: str, timeout: float | None = None) -> t.Job:
        """Block until the job ends (in-process callers; HTTP clients poll)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get(job_id)
            if job.state in ("succeeded", "failed") or (deadline is not None and time.monotonic() > deadline):
                return job
            time.sleep(0.05)

    def _trim(self) -> None:
        finished = [k for k, r in self._jobs.items() if r.state in ("succeeded", "failed")]
        for k in finished[: max(0, len(finished) - KEEP_FINISHED)]:
            del self._jobs[k]
            if self._shared is not None:
                (self._shared / f"{k}.json").unlink(missing_ok=True)

    def close(self) -> None:
        """Wait for the running jobs; those still queued never run: they fail, saying so."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._closing.set()
        for rec in list(self._jobs.values()):
            if rec.state in ("queued", "running"):
                rec.error = t.ErrorBody(code="job_lost", message=f"the server stopped before this {rec.kind} job ran: "
                                        "start it again")
                rec.state, rec.finished = "failed", now_us()
                rec.ended()
                self._publish(rec)
        if self._heartbeat is not None:
            self._heartbeat.join(timeout=5)


def lost(owner: dict[str, Any] | None, lease_until: float | None, *, now: float | None = None) -> str | None:
    """Why a published unfinished job's replica is gone (None: it may still run it): its process has ended (same
    host), or its lease ran out without a heartbeat."""
    if owner is not None and owner.get("host") == socket.gethostname():
        try:
            os.kill(int(owner["pid"]), 0)
        except ProcessLookupError:
            return f"(process {owner['pid']} on this host) has ended"
        except PermissionError:
            pass  # alive, another user's
    now = time.time() if now is None else now
    if lease_until is not None and now > lease_until:
        where = f"process {owner['pid']} on host {owner['host']}" if owner else "its replica"
        return f"({where}) let its lease run out at {iso(int(lease_until * 1_000_000))} without renewing it"
    return None

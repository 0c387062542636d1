"""Long operations (replay, verify, regenerate, forget) as jobs: start -> id; poll status, progress, result.

A job runs on a thread of the server; its record lives in memory for the life of the server (and
is forgotten with it: what a job did is in the log or the projections, not in the job).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from engram.api import types as t
from engram.api.clock import iso, now_us
from engram.api.errors import error, translate

# Replays and regenerations are heavy: two at a time on this machine's two cores, the rest wait.
MAX_CONCURRENT_JOBS = 2
# Finished jobs kept for polling.
KEEP_FINISHED = 200
JOB_ID_PREFIX = "job-"


class JobProgress:
    """What a running job reports: `advance(n)`, or `set(done, total)`."""

    def __init__(self, total: int, unit: str):
        self.done, self.total, self.unit = 0, total, unit
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n

    def set(self, done: int, total: int | None = None) -> None:
        with self._lock:
            self.done = done
            if total is not None:
                self.total = total


class _Record:
    def __init__(self, job_id: str, kind: str, progress: JobProgress):
        self.id, self.kind, self.progress = job_id, kind, progress
        self.state = "queued"
        self.created = now_us()
        self.finished: int | None = None
        self.result: dict | None = None
        self.error: t.ErrorBody | None = None

    def view(self) -> t.Job:
        p = self.progress
        return t.Job(id=self.id, kind=self.kind, state=self.state,
                     progress=t.Progress(done=p.done, total=p.total, unit=p.unit), created=iso(self.created),
                     finished=iso(self.finished) if self.finished else None, result=self.result, error=self.error)


class Jobs:
    def __init__(self):
        self._pool = ThreadPoolExecutor(max_workers=MAX_CONCURRENT_JOBS, thread_name_prefix="engram-job")
        self._jobs: dict[str, _Record] = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._token = os.urandom(3).hex()

    def start(self, kind: str, total: int, unit: str, work: Callable[[JobProgress], dict]) -> t.Job:
        """Run `work(progress) -> result` in the background; its id to poll."""
        progress = JobProgress(total, unit)
        rec = _Record(f"{JOB_ID_PREFIX}{self._token}-{next(self._ids)}", kind, progress)
        with self._lock:
            self._jobs[rec.id] = rec
            self._trim()

        def run() -> None:
            rec.state = "running"
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

        self._pool.submit(run)
        return rec.view()

    def get(self, job_id: str) -> t.Job:
        from engram.ids import InvalidIdError, validate_id

        try:
            validate_id(job_id, "job id")
        except InvalidIdError as exc:
            raise error("invalid_id", str(exc)) from None
        rec = self._jobs.get(job_id)
        if rec is None:
            raise error("unknown_job", f"no job {job_id!r} on this server (jobs live as long as the server)")
        return rec.view()

    def list(self) -> t.JobList:
        return t.JobList(jobs=[r.view() for r in list(self._jobs.values())])

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

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

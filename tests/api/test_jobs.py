"""Jobs of a server with several replicas: a job started on one replica is followed from another."""

from __future__ import annotations

import threading

import pytest

from engram.api.errors import ApiError
from engram.api.jobs import Jobs


def test_a_job_started_on_one_replica_is_polled_with_its_progress_result_and_followers_on_another(tmp_path):
    shared = tmp_path / "state" / "jobs" / "instance-token"
    first, second = Jobs(shared=shared), Jobs(shared=shared)
    gate, halfway = threading.Event(), threading.Event()

    def work(progress) -> dict:
        progress.set(1, 2)
        halfway.set()
        assert gate.wait(30)
        return {"erased": 7}

    try:
        job = first.start("forget", 2, "steps", work)
        first.follow(job.id, frozenset({"alice"}))
        assert halfway.wait(30)
        seen = second.get(job.id)
        assert seen.kind == "forget" and seen.state == "running"
        assert second.followers(job.id) == (True, frozenset({"alice"}))
        assert [j.id for j in second.list().jobs] == [job.id]
        gate.set()
        done = second.get(job.id)
        for _ in range(600):
            if done.state == "succeeded":
                break
            threading.Event().wait(0.05)
            done = second.get(job.id)
        assert done.state == "succeeded" and done.result == {"erased": 7} and done.progress.done == 1
    finally:
        gate.set()
        first.close()
        second.close()


def test_without_a_shared_directory_a_job_is_known_only_where_it_runs(tmp_path):
    first, second = Jobs(), Jobs()
    try:
        job = first.start("replay", 1, "shards", lambda progress: {})
        assert first.wait(job.id, timeout=30).state == "succeeded"
        with pytest.raises(ApiError) as err:
            second.get(job.id)
        assert err.value.code == "unknown_job"
        assert second.followers(job.id) == (False, None)
    finally:
        first.close()
        second.close()


REPLICA = """
import sys, threading, time
from pathlib import Path
from engram.api.jobs import Jobs

jobs = Jobs(shared=Path(sys.argv[1]), lease_s=float(sys.argv[2]))
started = threading.Event()

def work(progress):
    progress.set(1, 3)
    started.set()
    threading.Event().wait()  # runs until the process ends

job = jobs.start("replay", 3, "shards", work)
started.wait(30)
print(job.id, flush=True)
threading.Event().wait()
"""


def _replica_with_a_running_job(shared, lease_s: float):
    """Another replica (a process) publishing into `shared`, running a job that never ends: (process, job id)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", REPLICA, str(shared), str(lease_s)], stdout=subprocess.PIPE, text=True)
    job_id = proc.stdout.readline().strip()
    assert job_id.startswith("job-"), job_id
    return proc, job_id


def _poll(jobs, job_id: str, state: str, seconds: float = 30.0):
    import time

    deadline = time.monotonic() + seconds
    job = jobs.get(job_id)
    while job.state != state and time.monotonic() < deadline:
        time.sleep(0.05)
        job = jobs.get(job_id)
    return job


def test_a_job_whose_replica_process_dies_turns_failed_with_the_cause_instead_of_running_forever(tmp_path):
    import signal

    shared = tmp_path / "state" / "jobs" / "instance-token"
    proc, job_id = _replica_with_a_running_job(shared, lease_s=600)
    here = Jobs(shared=shared)
    try:
        assert here.get(job_id).state == "running"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        job = here.get(job_id)  # at once: the owner's process is gone (the lease has 10 minutes left)
        assert job.state == "failed" and job.error.code == "job_lost"
        assert f"process {proc.pid}" in job.error.message and "start it again" in job.error.message
        assert job.kind == "replay" and job.progress.total == 3  # the record it had published
        assert [j.state for j in here.list().jobs] == ["failed"]
    finally:
        proc.kill()
        here.close()


def test_a_job_whose_replica_stops_renewing_its_lease_turns_failed_and_a_live_one_stays_running(tmp_path):
    import signal

    shared = tmp_path / "state" / "jobs" / "instance-token"
    proc, job_id = _replica_with_a_running_job(shared, lease_s=1.5)
    here = Jobs(shared=shared)
    try:
        # Alive, it renews its lease: still running after more than one lease.
        threading.Event().wait(2.5)
        assert here.get(job_id).state == "running"
        proc.send_signal(signal.SIGSTOP)  # frozen (as a replica cut off on another host): no more heartbeats
        job = _poll(here, job_id, "failed")
        assert job.state == "failed" and job.error.code == "job_lost" and "lease" in job.error.message
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        here.close()


def test_jobs_still_queued_when_the_server_stops_fail_saying_so(tmp_path):
    jobs = Jobs()
    gate = threading.Event()
    started = [jobs.start("replay", 1, "shards", lambda progress: gate.wait(30) and {}) for _ in range(2)]
    queued = jobs.start("verify", 1, "shards", lambda progress: {})
    assert jobs.get(queued.id).state == "queued"
    closer = threading.Thread(target=jobs.close)
    closer.start()
    gate.set()
    closer.join(30)
    assert [jobs.get(j.id).state for j in started] == ["succeeded", "succeeded"]
    job = jobs.get(queued.id)
    assert job.state == "failed" and job.error.code == "job_lost" and "stopped before" in job.error.message

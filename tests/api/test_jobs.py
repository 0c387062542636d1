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

"""Flow control: a burst of appends slows its producers (bounded waiting, then 429 with Retry-After) instead of
queueing without bound; a shard whose memory creation falls far behind refuses appends until it catches up."""

from __future__ import annotations

import json
import threading
import time

import pytest
from tests.events.helpers import write

from engram.api import types as t
from engram.api.errors import ApiError
from engram.kernel.flow import Backpressure, InFlight


def test_a_producer_past_the_in_flight_bound_waits_for_a_slot_and_then_goes_through():
    window = InFlight("shard 0", limit=1, wait_s=5.0)
    window.__enter__()
    threading.Timer(0.3, window.__exit__, args=(None, None, None)).start()
    started = time.monotonic()
    with window:
        waited = time.monotonic() - started
    assert 0.2 < waited < 5.0 and window.peak == 1 and window.refused == 0


def test_a_producer_that_waited_its_bounded_time_is_refused_with_a_retry_after():
    window = InFlight("shard 0", limit=2, wait_s=0.1, retry_after_s=2.0)
    with window, window:
        with pytest.raises(Backpressure, match="2 appends in flight") as refused:
            with window:
                pass
    assert refused.value.retry_after_s == 2.0 and window.refused == 1 and window.in_flight == 0


@pytest.fixture
def served(tmp_path):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.inprocess import InProcessRuntime
    from tests.server.helpers import Served

    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"limits": {"maxInflightAppends": 1, "backpressureWaitSeconds": 0.2}}))
    mem = Engram(InProcessRuntime(load_service_config(home), wall_clock=False).start())
    with Served(mem) as server:
        yield mem, server
    mem.close()


def test_the_api_answers_a_burst_past_the_bound_with_429_backpressure_and_retry_after(served):
    mem, server = served
    message = t.Message(role="user", content="Book the train to Porto", message_id="u1")
    with mem.rt.window(0), server.client() as client:  # the shard's one slot is taken
        with pytest.raises(ApiError) as refused:
            client.append_messages("ada", "trip", [message])
    assert refused.value.status == 429 and refused.value.code == "backpressure"
    assert refused.value.retry_after == 1.0
    assert sum(mem.rt.heads().values()) == 0  # nothing of the refused append was written
    with server.client() as client:  # the slot is free again: the same append goes through
        assert client.append_messages("ada", "trip", [message]).results[0].appended == 1


def test_a_shard_whose_projections_lag_too_far_refuses_appends_until_they_catch_up(tmp_path):
    from engram.shard.host import ShardHost

    host = ShardHost(tmp_path / "log.duckdb", tmp_path / "projections", max_projection_lag=5)
    try:
        host._stop.set()  # the fold thread stops: memory creation falls behind
        host._thread.join()
        host.append_many([write("d1", range(10))])
        with pytest.raises(Backpressure, match="10 events behind"):
            host.append_many([write("d1", range(10, 11))])
        assert host.head() == 10
        host.catch_up()
        assert host.append_many([write("d1", range(10, 11))])[0].seqs == (11,)
    finally:
        host.close()

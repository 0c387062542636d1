"""Nobody can stall the server by making it log (issue 21, finding 3).

Against a real server process (`python -m engram.boot serve`, in-process runtime) with an API key configured: after
an /mcp call (whose SDK used to put a Rich traceback handler on the root logger: about a second on the event loop
per logged error), requests that used to log a traceback each (a malformed `Authorization` header: a 500 from
`hmac.compare_digest`; clients that announce a body and go away) must not delay a concurrent `/v1/health`, answer
4xx, and leave one short line each in the log at most.
"""

from __future__ import annotations

import http.client
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

import pytest
from tests.server.helpers import ServerProcess

pytestmark = pytest.mark.server

LOAD_S = 4.0  # how long two clients send malformed requests and two hang up mid-body, while health is probed
ALLOWED_DELAY_S = 0.100
STALL_S = 0.5


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from engram.server.keys import add_key

    home = tmp_path_factory.mktemp("stall") / "home"
    home.mkdir()
    key, _ = add_key(home, ("alice",))
    with ServerProcess(home) as proc:
        yield proc, key


def connect(url: str) -> http.client.HTTPConnection:
    parts = urlsplit(url)
    return http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)


def call(url: str, method: str, path: str, headers: dict, body: bytes | None = None) -> tuple[int, bytes]:
    conn = connect(url)
    try:
        conn.putrequest(method, path)
        for name, value in headers.items():
            conn.putheader(name, value)  # a bytes value goes on the wire as it is
        if body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def health_seconds(url: str) -> float:
    started = time.perf_counter()
    status, _ = call(url, "GET", "/v1/health", {})
    assert status == 200
    return time.perf_counter() - started


def mcp_initialize(url: str, key: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stall-test", "version": "1"}}})
    status, answer = call(url, "POST", "/mcp", {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                                                 "Accept": "application/json, text/event-stream"}, body.encode())
    assert status == 200 and json.loads(answer)["result"]["serverInfo"]["name"] == "engram"


def go_away_mid_body(url: str, key: str) -> None:
    """Announce a 1000-byte body, send one byte, hang up."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as s:
        s.sendall((f"POST /v1/agents/alice/discussions/d1/messages HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                   f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{")
                  .encode())
        time.sleep(0.05)


def test_requests_that_used_to_log_tracebacks_do_not_delay_a_concurrent_health_probe(server):
    proc, key = server
    url = proc.url
    mcp_initialize(url, key)  # the MCP SDK is set up now, in the server process
    baseline = statistics.median(health_seconds(url) for _ in range(20))

    statuses: list[int] = []
    stop = threading.Event()

    def malformed() -> None:
        while not stop.is_set():
            statuses.append(call(url, "GET", "/v1/status", {"Authorization": b"Bearer \xc3\xa9"})[0])

    def going_away() -> None:
        while not stop.is_set():
            go_away_mid_body(url, key)

    workers = [threading.Thread(target=f) for f in (malformed, malformed, going_away, going_away)]
    for w in workers:
        w.start()
    delays: list[float] = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < LOAD_S:
            delays.append(health_seconds(url) - baseline)
            time.sleep(0.02)
    finally:
        stop.set()
        for w in workers:
            w.join()

    assert len(statuses) >= 20 and set(statuses) == {401}  # a malformed key is a refusal, not a server error
    delays.sort()
    typical, worst = delays[len(delays) * 9 // 10], delays[-1]
    # Each of these requests used to hold the event loop for about a second (a Rich traceback on the root logger);
    # now a probe waits at most for the few requests ahead of it. 90% of the probes within 100 ms of the baseline,
    # and none held for anything like a logged traceback (the worst allows for a loaded machine).
    assert typical < ALLOWED_DELAY_S and worst < STALL_S, (
        f"/v1/health delayed by {typical * 1000:.0f} ms (90th percentile), {worst * 1000:.0f} ms at worst, over "
        f"{len(delays)} probes (baseline {baseline * 1000:.1f} ms)")


def test_the_server_log_has_one_short_line_per_disconnect_and_no_traceback(server):
    proc, key = server
    for _ in range(3):
        go_away_mid_body(proc.url, key)
    health_seconds(proc.url)
    deadline = time.monotonic() + 10
    while "went away" not in proc.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    text = proc.log.read_text()
    assert "Traceback" not in text and "ClientDisconnect" not in text and "Exception in ASGI application" not in text
    gone = [line for line in text.splitlines() if "went away" in line]
    assert gone and all(len(line) < 200 for line in gone)
    assert "INFO engram.server: POST /v1/agents/alice/discussions/d1/messages: the client went away" in gone[-1]


def test_building_the_mcp_server_leaves_the_root_logger_alone():
    # In a fresh interpreter: the test process's root logger has pytest's handlers, which hide the SDK's basicConfig.
    probe = ("import logging; from engram.mcp.server import build; build(lambda ctx: None); "
             "print([type(h).__name__ for h in logging.getLogger().handlers])")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_logging_never_waits_for_a_stalled_stream_and_writes_one_line_per_record():
    # A process whose stderr is a pipe nobody reads (the pipe fills after 64 KiB): logging 20,000 errors with their
    # exceptions returns at once; what could not be queued is dropped and said so, and every line is one record.
    script = """
import logging, sys, time
from engram.kernel import logs
logs.configure()
log = logging.getLogger("engram.server")
started = time.perf_counter()
for i in range(20_000):
    try:
        raise KeyError(f"no such thing {i}\\nsecond line")
    except KeyError:
        log.exception("GET /v1/x failed")
print(f"{time.perf_counter() - started:.3f}", flush=True)
sys.stdin.readline()  # the test reads stderr now
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        seconds = float(proc.stdout.readline())
        proc.stdin.write("\n")
        proc.stdin.flush()
        err = proc.communicate(timeout=60)[1]
    finally:
        proc.kill()
    assert seconds < 5.0, f"logging waited for the stream: {seconds:.1f}s for 20,000 records"
    lines = err.splitlines()
    assert "Traceback" not in err
    assert any("log records dropped (the log stream was too slow)" in line for line in lines)
    first = next(line for line in lines if "failed" in line)
    assert first.endswith(" ERROR engram.server: GET /v1/x failed: KeyError: 'no such thing 0\\nsecond line' "
                          "(<string>:9 in <module>)")

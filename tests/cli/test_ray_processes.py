"""A home's local Ray instance as another user of the machine, or a crash, meets it (issue 21, findings 6 and 12).

- Its temp dir is private (0700, this user's), Ray's own world-writable directory inside it;
- every socket of the server's process tree listens on loopback, and the metrics exporters are off;
- a `kill -9` of the server leaves no process of its Ray instance behind (Ray's DashboardAgent and
  RuntimeEnvAgent used to run on for minutes).

A real server process on the Ray runtime, under the shared Ray lock.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import stat
import subprocess
import time

import pytest

from tests.server.helpers import ServerProcess

pytestmark = [pytest.mark.ray, pytest.mark.server]


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def descendants(pid: int) -> dict[int, str]:
    """pid -> command of every running descendant of `pid` (from /proc: its threads' children, recursively)."""
    found: dict[int, str] = {}
    stack = [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                kids = [int(c) for c in open(f"/proc/{parent}/task/{task}/children").read().split()]
            except OSError:
                continue
            for kid in kids:
                if kid not in found and alive(kid):
                    try:
                        found[kid] = open(f"/proc/{kid}/cmdline").read().replace("\0", " ").strip()[:100]
                    except OSError:
                        continue
                    stack.append(kid)
    return found


def running(pids) -> list[int]:
    return [p for p in pids if alive(p)]


def listeners(pids) -> list[tuple[str, str]]:
    """(local address, process) of every listening TCP socket of `pids`."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if any(f"pid={p}," in line for p in pids):
            found.append((fields[3], fields[-1]))
    return found


def is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host.startswith("::ffff:"):
        host = host[len("::ffff:"):]
    if host in ("*", "0.0.0.0", "::"):
        return False
    return ipaddress.ip_address(host).is_loopback


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """The module's server processes on Ray, each stopped at the end if a test has not ended it."""
    servers: list[ServerProcess] = []
    yield servers
    for proc in servers:
        proc.__exit__(None, None, None)


@pytest.fixture
def server(started, tmp_path_factory):
    """A running server process on Ray: the one a test before this one only looked at, else a new one (starting
    one on Ray costs seconds: the test that looks shares its server with the next test, which kills it)."""
    if not started or started[-1].proc is None or started[-1].proc.poll() is not None:
        started.append(ServerProcess(tmp_path_factory.mktemp("ray-home") / "home", runtime="ray"))
        started[-1].__enter__()  # listed first: stopped at the end even if it fails to come up
    return started[-1]


def test_the_ray_temp_dir_is_private_and_every_socket_listens_on_loopback(server):
    from engram.runtime.startup import temp_dir_for

    root = temp_dir_for(server.home)
    st = root.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o700, os.getuid())
    sessions = list(root.glob("*/session_2*"))  # Ray's own (0777) directory is inside it
    assert sessions
    tree = descendants(server.proc.pid)
    assert any("raylet" in c for c in tree.values()) and any("DashboardAgent" in c for c in tree.values())
    sockets = listeners([server.proc.pid, *tree])
    assert sockets, "no listening socket found for the server's processes"
    exposed = [s for s in sockets if not is_loopback(s[0])]
    assert exposed == [], f"listening beyond loopback: {exposed}"
    # The metrics exporters: the agents' is off; the autoscaler's (44217) and the dashboard head's (44227) are
    # on loopback (checked above).
    assert [p.read_text().strip() for p in sessions[0].glob("metrics_export_port_*")] == ["-1"]


def test_a_killed_server_leaves_no_process_of_its_ray_instance(server):
    tree = descendants(server.proc.pid)
    agents = [p for p, c in tree.items() if "DashboardAgent" in c or "RuntimeEnvAgent" in c]
    assert len(agents) == 2, tree
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(30)
    deadline = time.monotonic() + 10
    while running(tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {p: tree[p] for p in running(tree)}
    assert left == {}, f"still running {time.monotonic() - deadline + 10:.1f}s after kill -9: {left}"


def test_a_server_stopped_cleanly_leaves_no_process_behind_either(server):
    tree = descendants(server.proc.pid)
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(120)
    deadline = time.monotonic() + 10
    while running(tree) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert {p: tree[p] for p in running(tree)} == {}

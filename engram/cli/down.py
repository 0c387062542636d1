"""`engram down`: stop the home's server (it closes the home cleanly: projections checkpointed, DuckDB closed)."""

from __future__ import annotations

import time

from engram.cli.common import home_of
from engram.cli.errors import UsageError

STOP_TIMEOUT_S = 120.0


def register(sub) -> None:
    p = sub.add_parser("down", help="stop the home's server")
    p.set_defaults(func=run)


def run(args) -> int:
    from engram.client import Client
    from engram.server.instance import live_server, pid_alive, read_instance

    home = home_of(args)
    info = live_server(home)
    if info is None:
        stale = read_instance(home)
        print(f"no engram server runs for {home}" + (" (its instance.json was stale)" if stale else ""))
        return 0
    pid = int(info["pid"])
    with Client(info["url"], api_key=info.get("token")) as mem:
        mem.shutdown()
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(pid):
        raise UsageError(f"the server of {home} (pid {pid}) is still stopping after {STOP_TIMEOUT_S:.0f}s")
    print(f"stopped the engram server of {home} (pid {pid})")
    return 0

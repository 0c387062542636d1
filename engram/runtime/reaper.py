"""Ray's processes die with the process that started them, however it ends (a `kill -9` too).

The GCS and the raylet that `ray.init` starts die with the thread that started them (Ray sets PR_SET_PDEATHSIG), and
workers die with their raylet. The raylet's DashboardAgent and RuntimeEnvAgent notice that their raylet is gone but
then hang on their way out (Ray 2.60: still running minutes after a `kill -9` of the server; no Ray option changes
it). So a local instance gets a reaper: a small process of its own session (terminal signals do not reach it) that

- keeps the list of the owner's descendants (pid and start time), refreshed every `REFRESH_S` while it changes and
  less often while it does not, up to every `REFRESH_MAX_S` (a process stays listed while it runs);
- when the owner is gone (the pipe the owner holds closes: an exit, a crash, a `kill -9`), sends SIGTERM to what
  of that list still runs, and SIGKILL to what still runs `GRACE_S` later;
- then does the same to every process whose command line names the instance's session directory (`marker`): a
  worker the raylet started after the last refresh, still importing when its raylet died (a worker names its
  raylet's socket, in the session directory, until it is up and renames itself `ray::…`); then exits.

A pid is only signalled while its start time is still the one listed (a reused pid is someone else's process).
`start(owner_pid)` starts it from the owner; this file runs as a script (`python -I reaper.py PID FD`), stdlib only,
so that it costs a few megabytes and imports nothing of engram or Ray.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

REFRESH_S = 0.5
# A refresh reads the `children` file of every thread of every descendant (Ray's processes run dozens of threads):
# every 0.5 s that was 31 ms of CPU a second on an idle home, the largest single part of what an idle home burnt.
# While the list does not change, each refresh waits twice as long as the last, up to this; a change (Ray starting
# its processes, a new worker) brings it back to REFRESH_S. What starts after the last refresh is still found when
# the owner ends: a worker dies with its raylet, and what names the session directory is reaped by `naming`.
REFRESH_MAX_S = 8.0
GRACE_S = 1.0

_keep: list[int] = []  # the owner's end of the pipe: open for the owner's whole life


def start(owner_pid: int | None = None, marker: str = "") -> int:
    """Start the reaper of this process's descendants (and of processes naming `marker`, a path of the instance's
    own, once the owner is gone); its pid."""
    read_end, write_end = os.pipe()  # both not inheritable: Ray's processes never hold the write end
    proc = subprocess.Popen([sys.executable, "-I", str(Path(__file__).resolve()), str(owner_pid or os.getpid()),
                             str(read_end), marker], pass_fds=(read_end,), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    os.close(read_end)
    _keep.append(write_end)
    return proc.pid


def started(pid: int) -> str | None:
    """The start time of `pid` (field 22 of /proc/PID/stat), or None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


# /proc/PID/task/TID/children needs a kernel built with CONFIG_PROC_CHILDREN; without it, parents are read from
# every process's stat instead.
HAS_CHILDREN_FILES = Path(f"/proc/self/task/{os.getpid()}/children").exists()


def children(pid: int, parents: dict[int, int] | None = None) -> list[int]:
    if parents is not None:
        return [p for p, parent in parents.items() if parent == pid]
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    except OSError:
        pass
    return found


def all_parents() -> dict[int, int]:
    """pid -> parent pid of every process (field 4 of /proc/PID/stat)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def descendants(pid: int) -> dict[int, str]:
    """pid -> start time of every descendant of `pid` that runs now."""
    parents = None if HAS_CHILDREN_FILES else all_parents()
    found: dict[int, str] = {}
    stack = children(pid, parents)
    while stack:
        child = stack.pop()
        when = started(child)
        if when is not None and child not in found:
            found[child] = when
            stack += children(child, parents)
    return found


def reap(listed: dict[int, str]) -> None:
    """SIGTERM, then (after GRACE_S) SIGKILL, to every listed process that still runs as listed."""
    me = os.getpid()

    def running() -> list[int]:
        return [p for p, when in listed.items() if p != me and started(p) == when]

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in running():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + GRACE_S
        while running() and time.monotonic() < deadline:
            time.sleep(0.05)


def naming(marker: str) -> dict[int, str]:
    """pid -> start time of every running process whose command line contains `marker`."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                named = marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            when = started(int(entry)) if named else None
            if when is not None:
                found[int(entry)] = when
    return found


def watch(owner: int, fd: int, marker: str = "") -> None:
    listed = descendants(owner)
    interval = REFRESH_S
    while True:
        ready, _, _ = select.select([fd], [], [], interval)
        if ready and not os.read(fd, 1):  # end of file: the owner is gone
            break
        # Every process seen, for as long as it runs: a refresh while the owner is dying (its children already
        # handed to init) must not drop them from the list.
        before = listed
        listed = {pid: when for pid, when in listed.items() if started(pid) == when}
        listed.update(descendants(owner))
        interval = min(REFRESH_MAX_S, interval * 2) if listed == before else REFRESH_S
    reap(listed)
    if marker:
        reap(naming(marker))


if __name__ == "__main__":
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it ends when its owner does, not before
    watch(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")

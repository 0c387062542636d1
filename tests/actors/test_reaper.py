"""The reaper of a local Ray instance (`engram.runtime.reaper`), without Ray: an owner process starts it and a
grandchild that ignores SIGTERM and its parent's death (as Ray's agents do); whatever way the owner ends, the
grandchild ends within seconds. With Ray: tests/cli/test_ray_processes.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

OWNER = """
import subprocess, sys, time
from engram.runtime import reaper
stubborn = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(300)"],
    stdout=subprocess.PIPE, text=True)
stubborn.stdout.readline()
reaper.start()
time.sleep(1.5)  # the reaper's list holds the stubborn process now
print(stubborn.pid, flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)
time.sleep(300)
"""


def alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.parametrize("ending", ["kill -9", "exit"])
def test_what_the_owner_started_ends_with_it_however_it_ends(ending):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, "exit" if ending == "exit" else "wait"],
                             stdout=subprocess.PIPE, text=True)
    stubborn = int(owner.stdout.readline())
    try:
        assert alive(stubborn)
        if ending == "kill -9":
            os.kill(owner.pid, signal.SIGKILL)
        owner.wait(30)
        deadline = time.monotonic() + 10
        while alive(stubborn) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(stubborn), f"the owner's child outlived it ({ending})"
    finally:
        for pid in (owner.pid, stubborn):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_a_reused_pid_is_never_signalled():
    from engram.runtime import reaper

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        listed = {sleeper.pid: "1"}  # the pid as it was listed, with a start time it no longer has
        reaper.reap(listed)
        assert alive(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()

"""The reaper's refresh (`engram.runtime.reaper.watch`), without processes: it reads the owner's descendants often
while they change and backs off while they do not (an idle home's largest CPU cost was the reaper reading every
thread's `children` file twice a second), and a change brings the short interval back."""

from __future__ import annotations

import os

from engram.runtime import reaper


def test_the_refresh_backs_off_while_nothing_changes_and_returns_on_a_change(monkeypatch):
    read_end, write_end = os.pipe()
    waits: list[float] = []
    # what the owner's descendants are at each refresh: stable, then one more process, then stable again
    seen = [{1: "a"}] * 7 + [{1: "a", 2: "b"}] * 4
    calls = iter(seen + [{1: "a", 2: "b"}] * 100)

    def fake_select(rlist, wlist, xlist, timeout):
        waits.append(timeout)
        if len(waits) == len(seen):
            os.close(write_end)  # the owner ends: the pipe reads end of file
            return rlist, [], []
        return [], [], []

    reaped: list[dict] = []
    monkeypatch.setattr(reaper.select, "select", fake_select)
    monkeypatch.setattr(reaper, "descendants", lambda owner: dict(next(calls)))
    monkeypatch.setattr(reaper, "started", lambda pid: {1: "a", 2: "b"}[pid])
    monkeypatch.setattr(reaper, "reap", lambda listed: reaped.append(dict(listed)))
    try:
        reaper.watch(owner=12345, fd=read_end)
    finally:
        os.close(read_end)
    s, m = reaper.REFRESH_S, reaper.REFRESH_MAX_S
    assert waits[:6] == [s, 2 * s, 4 * s, 8 * s, min(m, 16 * s), min(m, 32 * s)]
    assert waits[6] == min(m, 64 * s) and waits[7] == s  # the new process: back to the short interval
    assert waits[8] == 2 * s
    assert max(waits) <= m
    assert reaped == [{1: "a", 2: "b"}]  # everything listed is reaped when the owner ends

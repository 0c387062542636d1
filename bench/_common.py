"""What several benchmarks share: percentiles, client threads started together, Ray processes by name, stopping
py-spy profilers."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path


def pct(values: list[float], q: float) -> float | None:
    """The q-quantile of `values` (the nearest rank, linear index), rounded to 0.01; None for no values."""
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(q * (len(values) - 1))))], 2)


def system_processes(marker: str) -> dict[int, str]:
    """pid -> name of each process of a local Ray instance that is not one of its workers (the raylet, the GCS, Ray's
    agents, engram's reaper): every process whose command line names the instance's temp dir (`marker`) and does not
    run as `ray::…`. Their CPU is engram's cost too (an idle home's Ray processes and reaper burn some of every second),
    so the benchmarks count it beside the actors'."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            args = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if not args or args[0].startswith(b"ray::") or not any(marker.encode() in a for a in args):
            continue
        text = b" ".join(args).decode(errors="replace")
        name = next((n for key, n in (("reaper.py", "reaper"), ("gcs_server", "gcs_server"), ("raylet", "raylet"),
                                      ("runtime_env", "runtime_env_agent"), ("dashboard", "dashboard_agent"),
                                      ("log_monitor", "log_monitor")) if key in text), Path(args[0].decode(errors="replace")).name)
        out[int(d.name)] = name
    return out


def run_threads(worker, count: int) -> float:
    """Run `worker(i)` for each of `count` threads at once; the wall time until the last one ends."""
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    started = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - started


def process_names(home: Path | None) -> dict[int, str]:
    """pid -> name of each Ray worker process of the home's local instance: the actor as Ray names it at the top
    of its worker's log (`:actor_name:`, e.g. "PolicyActor(trace-reader shard 0 member 0/1)", "ShardActor")."""
    if home is None:
        return {}
    from engram.runtime.startup import ray_dir_for

    out = {}
    for f in (ray_dir_for(home) / "session_latest" / "logs").glob("worker-*"):
        if f.suffix not in (".out", ".err"):
            continue
        try:
            pid = int(f.stem.rsplit("-", 1)[1])
            with f.open(errors="replace") as lines:
                for n, line in enumerate(lines):
                    if line.startswith(":actor_name:"):  # the class's name at first, its repr once it is made
                        out[pid] = line[len(":actor_name:"):].strip()
                    if n > 50:
                        break
        except (OSError, ValueError):
            continue
    return out


def stop_profilers(procs: list[subprocess.Popen]) -> None:
    """Stop py-spy recorders (SIGINT makes each write its samples), waiting up to a minute for each."""
    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()

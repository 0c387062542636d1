"""What a shard's checkpoint costs with many agents: DuckDB statements per checkpoint and their CPU, in one process.

    .venv/bin/python bench/checkpoint.py --home DIR [--build --agents 1000 --per-agent 4] [--window 500,2000]
                                         [--count] [--keep DIR]

`--build`: a home of `--agents` agents built in process (no Ray), each writing `--per-agent` messages into its own
discussion as `bench/scale.py` sends them (every agent's i-th message before anyone's (i+1)-th, its chunking
settings), every policy run. Then, for each `--window` W: the home's log folded into fresh projections W events
at a time, a checkpoint after each (`ProjectionRunner.catch_up(checkpoint_every=W)`), as a live shard checkpoints
what it folded since the last one. Reported per window (one JSON line): checkpoints, the checkpoints' CPU (thread
time) and the whole fold's, the seconds each projection spent checkpointing (wall); with `--count`, the DuckDB calls
(`execute`, `executemany`, `register`) each checkpoint made, by projection (counting slows the checkpoints: compare
CPU without it). `--keep DIR`: the folded projections are left in DIR (to compare two builds' with
`engram.projections.compare.differences`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402

from bench.scale import SETTINGS  # noqa: E402
from engram.api import types as t  # noqa: E402
from engram.boot.embedded import Engram  # noqa: E402
from engram.config.home import ProjectionPaths  # noqa: E402
from engram.projections.base import ProjectionContext  # noqa: E402
from engram.projections.registry import build_projections  # noqa: E402
from engram.projections.runner import ProjectionRunner  # noqa: E402


def build(home: Path, agents: int, per_agent: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "engram.json").write_text(json.dumps({"shards": 1}))
    (home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(SETTINGS))
    with Engram.open(home, runtime="inprocess", auto_settle=False) as mem:
        for i in range(per_agent):
            for a in range(agents):
                mem.append_messages(f"agent-{a:04d}", f"chat-{a}", t.AppendRequest(messages=[t.Message(
                    role="user" if i % 2 == 0 else "assistant", message_id=f"m{i}",
                    content=f"Order {a}-{i}: the blue parcel for customer {a} leaves the Porto depot on "
                            f"day {i + 1}; please confirm the delivery window with the courier.")]))
            mem.wait_idle()


class Counted:
    """A connection whose calls of a statement are counted, by the projection module that made them, while `on`."""

    CALLS = ("execute", "executemany", "register", "sql")

    def __init__(self, real: duckdb.DuckDBPyConnection):
        self._real = real
        self.on = False
        self.counts: dict[str, int] = {}

    def __getattr__(self, name: str):
        attr = getattr(self._real, name)
        if self.on and name in self.CALLS:
            who, frame = "?", sys._getframe(1)
            while frame is not None:
                file = frame.f_code.co_filename
                if "/projections/" in file and not file.endswith(("base.py", "runner.py")):
                    who = Path(file).stem
                    break
                if frame.f_code.co_name == "write_together":
                    who = "positions"
                    break
                frame = frame.f_back
            self.counts[who] = self.counts.get(who, 0) + 1
        return attr


def fold(home: Path, window: int, count: bool, keep: str | None) -> dict:
    with Engram.open(home, runtime="inprocess", auto_settle=False) as mem:
        host = mem.rt.shard_host(0)
        out = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="engram-checkpoint-"))
        paths = ProjectionPaths(out)
        paths.root.mkdir(parents=True, exist_ok=True)
        real = duckdb.connect(str(paths.shard_db(0)))
        if count:  # an Arrow insert's table is found by its name in the caller's frame, past the counting wrapper
            real.execute("SET python_scan_all_frames = true")
        db = Counted(real) if count else real
        runner = ProjectionRunner(build_projections(ProjectionContext(0, paths, db, host.services)),  # type: ignore[arg-type]
                                  host.store.read, batch=window)
        statements: list[int] = []
        by_projection: dict[str, int] = {}
        cpu: list[float] = []
        checkpoint = runner.checkpoint

        def measured() -> None:
            if count:
                db.counts, db.on = {}, True
            started = time.thread_time()
            checkpoint()
            cpu.append(time.thread_time() - started)
            if count:
                db.on = False
                statements.append(sum(db.counts.values()))
                for name, n in db.counts.items():
                    by_projection[name] = by_projection.get(name, 0) + n

        runner.checkpoint = measured  # type: ignore[method-assign]
        started = time.process_time()
        events = runner.catch_up(checkpoint_every=window)
        fold_cpu = time.process_time() - started
        timings = runner.timings.report()
        runner.close()
        real.close()
        if not keep:
            shutil.rmtree(out, ignore_errors=True)
    report = {"window": window, "events": events, "checkpoints": len(cpu), "checkpoint_cpu_s": round(sum(cpu), 2),
              "fold_cpu_s": round(fold_cpu, 2),
              "checkpoint_s_by_projection": {k: round(v.get("checkpoint_s", 0), 2) for k, v in timings.items()
                                             if v.get("checkpoint_s")}}
    if count:
        report.update({"statements_per_checkpoint": round(sum(statements) / max(len(statements), 1), 1),
                       "statements_max": max(statements, default=0), "statements_by_projection": by_projection})
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", required=True)
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--per-agent", type=int, default=4)
    ap.add_argument("--window", default="500,2000")
    ap.add_argument("--count", action="store_true")
    ap.add_argument("--keep")
    args = ap.parse_args()
    home = Path(args.home)
    if args.build:
        build(home, args.agents, args.per_agent)
    for window in map(int, args.window.split(",")):
        print(json.dumps({**fold(home, window, args.count, args.keep), "load_average_1m": round(os.getloadavg()[0], 2)}),
              flush=True)


if __name__ == "__main__":
    main()

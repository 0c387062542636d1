"""Reliability soak: the suite's reliability checks, many more times. Prints one JSON object.

- kills: kill -9 a process appending with group commits (4 writer threads; every tenth trial also folding its
  projections) at a random moment, then check the log: every acknowledged append present, nothing half-written,
  seq gap-free, no stale lock, projections caught up to a clean replay (`--kills`, default 1,000);
- sequences: generated operation sequences (agents and discussions interleaved, retries, duplicate message ids,
  restarts with stale snapshots, forgets) on the plain classes with the summarizer, auto-ingest and
  working-memory policies: replay from zero equals live, replays of marked prefixes equal what was live,
  re-handling appends nothing (`--sequences`, default 200);
- events: generated events of every type of the catalogue, a quarter hostile (NaN, lone surrogates, absurd
  times): each one acknowledged reads back exactly, each refused one leaves nothing (`--events`, default 20,000).

    .venv/bin/python bench/soak.py [--kills 1000] [--sequences 200] [--events 20000] [--seed 0]
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def soak_kills(n: int, seed: int) -> dict:
    from tests.reliability.crash import kill_during_appends

    started = time.perf_counter()
    out = {"trials": n, "acknowledged_writes": 0, "events": 0, "with_projections": 0, "problems": [], "replay_differences": []}
    with tempfile.TemporaryDirectory(prefix="engram-soak-kills-") as tmp:
        for trial in range(n):
            projections = trial % 10 == 0
            result = kill_during_appends(Path(tmp) / f"t{trial}", seed=seed * 1_000_000 + trial, with_projections=projections)
            out["acknowledged_writes"] += result.acked_writes
            out["events"] += result.events
            out["with_projections"] += projections
            out["problems"] += [f"trial {trial}: {p}" for p in result.problems]
            out["replay_differences"] += [f"trial {trial}: {d}" for d in result.replay_differences]
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def soak_sequences(n: int, seed: int) -> dict:
    from tests.reliability.sequences import SequenceRun, operations

    stats = {"cases": 0, "operations": 0, "restarts": 0, "forgets": 0, "events": 0, "failures": []}
    started = time.perf_counter()

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=[p for p in settings.default.phases if p.name != "shrink"])
    @given(ops=operations)
    def run(ops):
        stats["cases"] += 1
        try:
            with tempfile.TemporaryDirectory(prefix="engram-soak-seq-") as tmp:
                outcome = SequenceRun(Path(tmp), groups=["summarizer", "auto-ingest", "working-memory"]).run(ops)
        except Exception as exc:  # recorded, and the soak goes on
            stats["failures"].append({"ops": repr(ops)[:2000], "problems": [f"{type(exc).__name__}: {exc}"[:500]]})
            return
        stats["operations"] += len(ops)
        stats["restarts"] += outcome.restarts
        stats["forgets"] += outcome.forgets
        stats["events"] += outcome.events
        problems = outcome.replay_differences + outcome.as_of_differences
        if outcome.rehandled_appends:
            problems.append(f"{outcome.rehandled_appends} events appended when handling again")
        if outcome.retry_added:
            problems.append(f"{outcome.retry_added} events added by retried appends")
        if problems:
            stats["failures"].append({"ops": repr(ops)[:2000], "problems": problems[:10]})

    run._hypothesis_internal_use_seed = seed  # reproducible runs
    run()
    stats["seconds"] = round(time.perf_counter() - started, 1)
    return stats


def soak_events(n: int, seed: int) -> dict:
    from engram.events.envelope import NewEvent, Write
    from engram.events.store import AppendError, EventStore
    from tests.reliability.strategies import events, timestamps

    stats = {"generated": 0, "acknowledged": 0, "refused": 0, "mismatches": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="engram-soak-events-") as tmp:
        store = EventStore(Path(tmp) / "log.duckdb")

        @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        @given(event=st.one_of(events(), events(), events(), events(hostile=True)),
               ts_us=st.one_of(timestamps, timestamps, timestamps, st.integers(-(2**62), 2**62)))
        def run(event, ts_us):
            stats["generated"] += 1
            stream = f"s{store.head()}"
            try:
                [appended] = store.append_many([Write(stream=stream, agent="a", events=(NewEvent(event=event, ts_us=ts_us),))])
            except AppendError:
                stats["refused"] += 1
                return
            stats["acknowledged"] += 1
            [rec] = store.read(appended.seqs[0] - 1, limit=1)
            if rec.event != event or rec.ts_us != ts_us:
                stats["mismatches"].append(repr(event)[:300])

        run._hypothesis_internal_use_seed = seed
        run()
        store.close()
    stats["seconds"] = round(time.perf_counter() - started, 1)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--sequences", type=int, default=200)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    faulthandler.enable()  # a crash in native code (DuckDB, hnswlib) still says where
    report = {}
    for name, run, n in (("kills", soak_kills, args.kills), ("sequences", soak_sequences, args.sequences),
                         ("events", soak_events, args.events)):
        if n:
            report[name] = run(n, args.seed)
            print(json.dumps({name: report[name]}), file=sys.stderr, flush=True)  # each part as soon as it is done
    report["held"] = (not report.get("kills", {}).get("problems") and not report.get("kills", {}).get("replay_differences")
                      and not report.get("sequences", {}).get("failures") and not report.get("events", {}).get("mismatches"))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

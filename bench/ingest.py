"""Whole-system ingest throughput: every projection and policy, the offline provider, the MiniLM embedder.

    .venv/bin/python bench/ingest.py [LOCOMO_JSON ...] [--home DIR] [--no-verify] [--profile DIR]

The conversations of the given LoCoMo-format files (default: LoCoMo dev) are ingested the way
`engram ingest FILE` does it: one agent, one discussion per conversation, every turn at its session's
date, all of a file in one append, on local Ray with the default settings. The clock starts at the
first append (actors already started, as in a running server) and stops when every projection and
policy has handled the whole log, including the events the policies appended along the way.

Reported (one JSON object):
- messages, seconds, messages/s end to end and seconds per 1,000 messages;
- embeddings: texts the model computed per message (the home's EmbedderActor counters), texts asked
  for per message, embedder calls, and the embedder's own rate over the run (texts computed per second
  of model time) beside the rate the target is set against (one embedding per message);
- the per-stage breakdown: for each projection (fold and checkpoint seconds) and each policy (decide,
  append and snapshot seconds, events handled), as the shard and policy actors report them in
  `status()` (absent from builds that do not measure them);
- CPU seconds of each actor process over the ingest (the per-stage breakdown by process), and the same in
  milliseconds per message (what load on the machine changes least);
- the embedder's own rate at one text per message, measured in the same run (the issue's yardstick:
  ingest should reach 60% of it), and the ingest rate as a share of it;
- `ratios_to_floor`, first: the issue's ingest rows as ratios to the floor measured in the same run (the
  embedder alone on the same texts, its CPU per text): CPU per message / floor (target <= 1.6), share of the
  embedder's rate (>= 0.6), texts embedded per message (<= 1.3), and each process's CPU per message in floors;
- events appended by type, per message, and when each type was first and last appended (seconds after
  the first append: the stage whose events come last is on the critical path); the edges and
  reinforcements recorded (one per edge or review, whether an event of its own or carried in a compact
  event), which compare runs of builds that record them differently;
- the progress line of `engram ingest` as it moved: when it passed a quarter, half and three quarters of the
  messages, and how long each projection or policy was the one named behind;
- whether `engram replay --verify` finds the replayed projections identical to the live ones
  (skipped with --no-verify).

`--profile DIR`: py-spy samples every engram actor process during the ingest (collapsed stacks, one
file per actor, into DIR; needs `py-spy`: the `profile` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import stop_profilers, system_processes  # noqa: E402
from engram.boot.embedded import Engram  # noqa: E402
from engram.evaluation import locomo  # noqa: E402
from engram.memory.ingest.formats import parse_file  # noqa: E402
from engram.memory.ingest.messages import discussion_write  # noqa: E402

AGENT = "locomo"
# The target: whole-system ingest of at least this many messages per second on 2 cores.
TARGET_MESSAGES_PER_S = 120.0


def writes_of(paths: list[Path], max_message_chars: int) -> list:
    writes = []
    for path in paths:
        for conv in parse_file(path, fmt="locomo", now_us=0):
            writes.append(discussion_write(AGENT, conv.discussion, conv.messages, max_message_chars=max_message_chars))
    return [w for w in writes if w]


RAY_TEMP: Path | None = None  # this bench's Ray instance's temp dir (`start_ray`)


def actor_pids() -> dict[str, int]:
    """pid of every live engram actor of this Ray instance, by actor name; and Ray's own processes of the instance
    (raylet, GCS, agents), named "ray-system-<process>": their CPU is the ingest's cost too."""
    from ray._private import state  # the GCS's actor table (the state API needs the dashboard, not started here)

    pids = {a["Name"]: a["Pid"] for a in state.actors().values()
            if a["State"] == "ALIVE" and (a.get("Name") or "").startswith("engram-")}
    if RAY_TEMP is not None:
        pids.update({f"ray-system-{name}": pid for pid, name in system_processes(str(RAY_TEMP)).items()})
    return pids


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system CPU seconds of each process so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, pid in pids.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = (int(fields[11]) + int(fields[12])) / tick
    return out


def embedder_own_rate(texts: list[str]) -> dict:
    """The model alone (no cache) on one text per message, with every core it may use (min(2, CPUs) onnxruntime
    threads, whatever the index-time embedder is set to): the fastest it embeds here, the issue's yardstick.
    Also its CPU seconds (this process's, every thread's), the floor of a message's cost: one embedding of it."""
    from engram.providers.embeddings.factory import make_embedder

    embedder = make_embedder()
    embedder.embed(texts[:16])  # warm
    started, cpu_started = time.perf_counter(), time.process_time()
    embedder.embed(texts)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {"texts": len(texts), "seconds": round(seconds, 2), "texts_per_s": round(len(texts) / seconds, 1),
            "cpu_seconds": round(cpu, 3), "cpu_ms_per_text": round(cpu / len(texts) * 1000, 3)}


def ratios(messages: int, seconds: float, cpu: dict[str, float], computed: int, own: dict) -> dict:
    """The issue's ingest rows as ratios to the floor measured in the same run (`own`: the embedder alone on one text
    per message, the work a message cannot do without): CPU per message over the floor's CPU per text (target
    <= 1.6), the ingest's rate as a share of the embedder's own (>= 0.6), texts embedded per message (<= 1.3), and
    each process's CPU per message in floors."""
    floor_ms = own["cpu_ms_per_text"]
    per_message = {name: s / messages * 1000 for name, s in cpu.items()}
    return {
        "floor_cpu_ms_per_text": floor_ms,
        "cpu_per_message_over_floor": round(sum(per_message.values()) / floor_ms, 2),
        "share_of_embedder_rate": round(messages / seconds / own["texts_per_s"], 3),
        "texts_embedded_per_message": round(computed / messages, 3),
        "cpu_per_message_over_floor_by_process": {
            name: round(ms / floor_ms, 2) for name, ms in sorted(per_message.items(), key=lambda kv: -kv[1])},
        # The embedder actor's CPU per text it computed, in floors: what a text costs inside the ingest (batching,
        # cache, round trips and the machine's load) against the model alone.
        "embedder_cpu_per_text_over_floor": (round(per_message.get("embedder", 0.0) * messages / computed / floor_ms, 2)
                                             if computed else None),
        "targets": {"cpu_per_message_over_floor": 1.6, "share_of_embedder_rate": 0.6, "texts_embedded_per_message": 1.3},
    }


def start_profilers(out: Path) -> list[subprocess.Popen]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out.mkdir(parents=True, exist_ok=True)
    procs = []
    for name, pid in sorted(actor_pids().items()):
        role = name.split("-", 2)[-1]
        procs.append(subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--rate", "50", "--format", "raw", "--nonblocking",
             "--output", str(out / f"{role}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs



def breakdown(status: list[dict], policy_timings: list[dict]) -> dict:
    """Per stage, seconds spent over the run (as the actors measured them)."""
    projections: dict[str, dict] = {}
    for st in status:
        for name, t in (st.get("projection_timings") or {}).items():
            agg = projections.setdefault(name, {})
            for key, value in t.items():
                agg[key] = round(agg.get(key, 0) + value, 3)
    policies: dict[str, dict] = {}
    for rep in policy_timings:
        for name, t in rep.items():
            agg = policies.setdefault(name, {})
            for key, value in t.items():
                agg[key] = round(agg.get(key, 0) + value, 3)
    return {"projections": projections, "policies": policies}


def progress_line(looks: list[tuple[float, int, int, tuple[str, ...]]], messages: int) -> dict:
    """What the progress line of `engram ingest` showed (events every consumer handled, of the events appended
    since the start): when it first reached a quarter, half, three quarters of the messages, and for how many
    seconds each projection or policy was named as the one behind."""
    reached = {}
    for share in (0.25, 0.5, 0.75, 1.0):
        first = next((t for t, done, _, _ in looks if done >= share * messages), None)
        reached[f"{int(share * 100)}%_of_messages_at_s"] = None if first is None else round(first, 1)
    named: dict[str, float] = {}
    for (t0, _, _, behind), (t1, _, _, _) in zip(looks, looks[1:]):
        for name in behind:
            named[name] = named.get(name, 0.0) + (t1 - t0)
    return {"looks": len(looks), **reached,
            "seconds_named_behind": {k: round(v, 1) for k, v in sorted(named.items(), key=lambda kv: -kv[1])}}


def start_ray(num_cpus: int) -> Path:
    """A local Ray instance of our own (its own temp dir; never a stale cluster)."""
    import logging

    import ray

    global RAY_TEMP
    temp = RAY_TEMP = Path(tempfile.mkdtemp(prefix="ray-bench-", dir="/tmp"))
    ray.init(address="local", _temp_dir=str(temp), num_cpus=num_cpus, include_dashboard=False, namespace="engram-bench",
             log_to_driver=False, logging_level=logging.WARNING)
    return temp


def run(paths: list[Path], home: Path, verify: bool, profile: Path | None) -> dict:
    import ray

    with Engram.open(home) as mem:
        writes = writes_of(paths, mem.config.limits.max_message_chars)
        messages = sum(len(w.events) for w in writes)
        mem.sync_settings(AGENT, ts_us=min(e.ts_us for w in writes for e in w.events))
        mem.rt.start_policies()  # start every actor: start-up is not ingest
        ray.get(mem.runtime.embedder().warm.remote())
        mem.wait_idle(timeout=600)
        embedder = mem.runtime.embedder()
        before = ray.get(embedder.stats.remote())
        pids = actor_pids()
        cpu_before = cpu_seconds(pids)
        profilers = start_profilers(profile) if profile else []
        head_before = sum(mem.heads().values())
        started, started_epoch = time.perf_counter(), time.time()
        mem.append(writes)
        appended = time.perf_counter() - started
        looks: list[tuple[float, int, int, tuple[str, ...]]] = []  # what `engram ingest`'s progress line showed
        idle = mem.wait_idle(timeout=3600, on_progress=lambda done, total, behind: looks.append(
            (time.perf_counter() - started, done - head_before, total - head_before, behind)))
        seconds = time.perf_counter() - started
        cpu_after = cpu_seconds(pids)
        if profilers:
            stop_profilers(profilers)
        after = ray.get(embedder.stats.remote())
        status = mem.rt.shard_status()
        policy_reports = ray.get([h.status.remote() for h in mem.runtime.policies().values()])
        _, rows = mem.sql("SELECT type, count(*) FROM events GROUP BY type ORDER BY type")
        # The edges and reinforcements recorded, whichever event shape carries them (engram.events.compact).
        _, facts = mem.sql("SELECT (SELECT count(*) FROM ev_edge_added), (SELECT count(*) FROM ev_trace_reinforced)")
        # When each kind of event was appended, in seconds after the first append: which stage ends last.
        _, spans = mem.sql("SELECT type, epoch_ms(min(recorded_at)), epoch_ms(max(recorded_at)) FROM events "
                           "WHERE seq > ? GROUP BY type ORDER BY 3", [head_before])
        timeline = {t: [round(first / 1000 - started_epoch, 1), round(last / 1000 - started_epoch, 1)]
                    for t, first, last in spans}
        differences = None
        if verify:
            differences = [d for shard in mem.runtime.shards() for d in ray.get(shard.verify_replay.remote())]
    own = embedder_own_rate([f"{e.event.name or e.event.role}: {e.event.content}" for w in writes for e in w.events])
    cpu = {name.split("-", 2)[-1]: round(cpu_after[name] - cpu_before.get(name, 0.0), 2) for name in cpu_after}
    delta = {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], (int, float))}
    computed = delta.get("texts_computed", 0)
    model_s = delta.get("model_seconds")
    report = {
        "benchmark": "ingest",
        # The rows (issue 27): ratios to the floor measured here and now; the absolute figures below are for
        # reference (load on the machine moves them, much less the ratios of CPU seconds).
        "ratios_to_floor": ratios(messages, seconds, cpu, computed, own),
        "data": [str(p) for p in paths],
        "provider": "offline heuristic (offline-heuristic-v1)",
        "settings": "defaults (every projection and policy group, one agent, one shard)",
        "messages": messages,
        "append_seconds": round(appended, 3),
        "seconds": round(seconds, 2),
        "messages_per_s": round(messages / seconds, 1),
        "seconds_per_1000_messages": round(seconds / messages * 1000, 2),
        "target_messages_per_s": TARGET_MESSAGES_PER_S,
        "target_met": messages / seconds >= TARGET_MESSAGES_PER_S,
        "all_memory_written": idle,
        "embeddings": {
            "texts_computed": computed,
            "per_message": round(computed / messages, 3),
            "texts_requested": delta.get("texts_requested"),
            "requested_per_message": round(delta.get("texts_requested", 0) / messages, 3),
            "calls": delta.get("calls"),
            **({"model_seconds": round(model_s, 2),
                "model_texts_per_s": round(computed / model_s, 1) if model_s else None,
                "share_of_wall_time": round(model_s / seconds, 3)} if model_s is not None else {}),
        },
        # The yardstick: the embedder's own rate at one text per message, measured here and now.
        "embedder_own_rate_one_text_per_message": own,
        "share_of_embedder_rate": round(messages / seconds / own["texts_per_s"], 3),
        "cpu_seconds_by_actor": dict(sorted(cpu.items(), key=lambda kv: -kv[1])),
        "cpu_seconds_total": round(sum(cpu.values()), 2),
        # The same per message: what each stage costs a message, whatever the wall time (load) was.
        "cpu_ms_per_message_by_actor": {name: round(s / messages * 1000, 2)
                                        for name, s in sorted(cpu.items(), key=lambda kv: -kv[1])},
        "cpu_ms_per_message_total": round(sum(cpu.values()) / messages * 1000, 2),
        "breakdown": breakdown(status, [r.get("timings", {}) for r in policy_reports]),
        "events": dict(rows),
        "appended_from_to_s": timeline,
        "events_total": sum(n for _, n in rows),
        "events_per_message": round(sum(n for _, n in rows) / messages, 2),
        "edges_and_reinforcements_recorded": {"edges": facts[0][0], "reinforcements": facts[0][1]},
        "progress_line": progress_line(looks, messages),
        "replay_verify": None if differences is None else {"identical": not differences, "differences": differences[:20]},
        "cpus": os.cpu_count(),
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="*", default=[str(locomo.DEFAULT_PATH)])
    parser.add_argument("--home", help="engram home to build (default: a fresh temporary one, removed afterwards)")
    parser.add_argument("--no-verify", action="store_true", help="skip `replay --verify` after the ingest")
    parser.add_argument("--profile", help="py-spy every actor during the ingest, output into this directory")
    args = parser.parse_args()
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="engram-bench-ingest-"))
    import ray

    ray_temp = start_ray(os.cpu_count() or 2)
    try:
        report = run([Path(p) for p in args.data], home, not args.no_verify, Path(args.profile) if args.profile else None)
        print(json.dumps(report, indent=1))
        return 0
    finally:
        ray.shutdown()
        shutil.rmtree(ray_temp, ignore_errors=True)
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Many concurrent agents through the server: throughput, latencies, memory-creation lag, memory use, shards.

    .venv/bin/python bench/scale.py [--agents 10,100,1000] [--shards 1,2,4] [--per-agent 4] [--producers 16]
                                    [--cluster-agents 100] [--no-cluster] [--resident-agents N]
                                    [--shard-resident-agents N]

Part 1, one machine (`engram serve` started for a fresh home, on a local Ray instance, one shard): for each agent
count, every agent writes `--per-agent` messages into its own discussion, one message per request (the chat
pattern), from `--producers` client threads, while one more client reads (a keyword search of a discussion
already written) the whole time. Reported per run:
- messages/s end to end (first append -> every projection and policy idle);
- append p50/p99 (ms, per request), read p50/p99 during ingest (ms);
- memory-creation lag p50/p99: from a message's commit to the commit of its trace (auto-ingest's TraceEncoded
  naming it) and of its chunk memory (the Summarizer's ChunkSummarized covering it), from the log's own
  `recorded_at` times (the projection that shows them folds within PROJECTION_LINGER_S after). A chunk memory
  covers several messages and is made once its last one is in: with every agent's i-th message sent before
  anyone's (i+1)-th, the first messages of a chunk wait for a round of every other agent's messages (at 1,000
  agents, tens of seconds) before the chunk can exist. `chunk_memory_from_last_message` is the lag per chunk
  memory from the commit of its last message: the part that is engram's;
- embeddings per message: texts the embedder computed (rows added to the home's embedding cache) per message;
- peak RSS of all engram processes (the server and every Ray process under it), sampled every 0.5 s;
- per shard, at the end: the agents whose memory its traces projection holds (`resident_agents`) and the seconds
  each projection spent folding and checkpointing (`projection_seconds`: [fold, checkpoint] per projection).

`--resident-agents N` and `--shard-resident-agents N` bound the agents' memories each policy process and each
shard's traces projection keep (engram.json `ray.residentAgents`, `ray.shardResidentAgents`): with every agent
interleaved, a bound below the agent count lets every agent's memory go between its messages (the worst case for
the reads back), and peak RSS shows what the bound saves.

Part 2, a simulated three-node cluster (`ray.cluster_utils.Cluster`: head + two workers, one CPU each, all on
this machine), the server joining it (`RAY_ADDRESS`) with shards pinned round-robin to the nodes
(`cluster.nodes`): the same ingest with `--cluster-agents` agents on 1, 2 and 4 shards; the scaling ratio is
messages/s relative to one shard. On one 2-core machine the three "nodes" share the same two cores, so this
measures the overhead of spreading, not the gain of more machines (docs/scaling.md).

Prints one JSON object. Run it under the shared Ray lock.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import pct, process_names  # noqa: E402

ENGRAM = str(Path(sys.executable).parent / "engram")  # the venv running the bench (a worktree has no .venv)
NODES = ["head", "left", "right"]
# `--resident-agents N`: the agents' memories each policy process keeps (engram.json ray.residentAgents; None: default).
RESIDENT_AGENTS: int | None = None
# `--shard-resident-agents N`: the agents' memories each shard's traces projection keeps (ray.shardResidentAgents).
SHARD_RESIDENT_AGENTS: int | None = None
# Small discussions: a chunk memory every 3 messages (or 80 tokens), none held back: every agent gets one.
SETTINGS = {"chunkEstimatedTokenSize": 80, "maxMessagesBetweenChunks": 3, "lookbackStartTurn": 0}


# ---------------------------------------------------------------------------- memory of a process tree


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _tree(roots: list[int]):
    """Every pid in the process trees under `roots`, each once."""
    tree, seen, todo = _children(), set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo += tree.get(pid, [])
        yield pid


def tree_rss_mb(roots: list[int]) -> float:
    total = 0
    for pid in _tree(roots):
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total / 1e6


def tree_cpu(roots: list[int], rss: bool = False, names: dict[int, str] | None = None) -> dict[str, float]:
    """CPU seconds (user + system) of the processes in the trees under `roots`, by process title (a Ray actor's
    process by its class and pid, e.g. `ray::ShardActor 1234`, or by the actor's name in `names`: pid -> name), the
    busiest first; `rss`: their resident memory now (MB) instead."""
    out, names = {}, names or {}
    tick = os.sysconf("SC_CLK_TCK")
    page_mb = os.sysconf("SC_PAGE_SIZE") / 1e6
    for pid in _tree(roots):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read().split(b"\0")[0].decode(errors="replace").split(" ")[0][:60]
        except OSError:
            continue
        if title.startswith("ray::"):  # ray::<actor class>.<method running now>: the class, and which process
            title = f"{names.get(pid) or title.split('.')[0]} {pid}"
        value = int(fields[21]) * page_mb if rss else (int(fields[11]) + int(fields[12])) / tick
        out[title] = round(out.get(title, 0.0) + value, 1)
    return dict(sorted(((k, v) for k, v in out.items() if v >= (50 if rss else 0.5)), key=lambda kv: -kv[1]))


class PeakRss:
    """The peak resident memory of the process trees under `roots` (sampled every 0.5 s), and each process's own peak
    (`by_process`: pid -> MB)."""

    def __init__(self, roots: list[int]):
        self.roots, self.peak, self._stop = roots, 0.0, threading.Event()
        self.by_process: dict[int, float] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.is_set():
            total = 0.0
            for pid in _tree(self.roots):
                try:
                    with open(f"/proc/{pid}/statm") as f:
                        mb = int(f.read().split()[1]) * page / 1e6
                except OSError:
                    continue
                total += mb
                self.by_process[pid] = max(self.by_process.get(pid, 0.0), mb)
            self.peak = max(self.peak, total)
            self._stop.wait(0.5)

    def named(self, names: dict[int, str]) -> dict[str, float]:
        """Each process's peak (MB, at least 50), by the actor's name (or the process title) and pid, largest first."""
        out = {}
        for pid, mb in self.by_process.items():
            try:
                title = names.get(pid) or Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()[:60]
            except OSError:
                title = names.get(pid, "?")
            out[f"{title} {pid}"] = round(mb, 1)
        return dict(sorted(((k, v) for k, v in out.items() if v >= 50), key=lambda kv: -kv[1]))

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


# ---------------------------------------------------------------------------- one run


def start_server(home: Path, env: dict) -> dict:
    out = subprocess.run([ENGRAM, "status", "--json"], capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"the server did not start: {out.stderr[-2000:]}")
    return json.loads((home / "instance.json").read_text())


def cache_rows(home: Path) -> int | None:
    """Texts the embedder computed (rows of the home's embedding cache); None while another process holds the file
    (on a cluster the embedder actor is detached and outlives the server)."""
    import duckdb

    path = home / "cache" / "embeddings.duckdb"
    if not path.exists():
        return 0
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.IOException:
        return None
    try:
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return sum(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables)
    finally:
        con.close()


LAG_TRACE = """
SELECT epoch_ms(t.recorded_at) - epoch_ms(m.recorded_at)
FROM (SELECT shard, recorded_at, unnest(CAST(source_seqs AS BIGINT[])) AS src FROM events WHERE type = 'TraceEncoded') t
JOIN events m ON m.shard = t.shard AND m.seq = t.src AND m.type = 'MessageAppended'
"""
LAG_CHUNK = """
SELECT epoch_ms(c.recorded_at) - epoch_ms(m.recorded_at)
FROM events c JOIN events m ON c.type = 'ChunkSummarized' AND m.type = 'MessageAppended' AND m.shard = c.shard
 AND m.stream = c.stream AND m.seq BETWEEN CAST(c.first_seq AS BIGINT) AND CAST(c.last_seq AS BIGINT)
"""

# Per chunk memory, from the commit of its last message: a chunk cannot be made before its last message is in, and
# the messages before it wait for that one (with agents interleaved, a round of every other agent's message each).
LAG_CHUNK_LAST = """
SELECT epoch_ms(c.recorded_at) - epoch_ms(m.recorded_at)
FROM events c JOIN events m ON c.type = 'ChunkSummarized' AND m.type = 'MessageAppended' AND m.shard = c.shard
 AND m.seq = CAST(c.last_seq AS BIGINT)
"""


def lags(client) -> dict:
    """Lag per message, from the log's commit times (a shard's positions are joined within the shard)."""
    out = {}
    for name, query in (("trace", LAG_TRACE), ("chunk_memory", LAG_CHUNK), ("chunk_memory_from_last_message", LAG_CHUNK_LAST)):
        rows = client.sql(query).rows
        values = [float(r[0]) for r in rows if r[0] is not None]
        out[name] = {"p50_ms": pct(values, 0.5), "p99_ms": pct(values, 0.99), "messages": len(values)}
    return out


def ingest(url: str, agents: int, per_agent: int, producers: int) -> dict:
    from engram.api import types as t
    from engram.client import Client

    names = [f"agent-{i:04d}" for i in range(agents)]
    appends: list[float] = []
    reads: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    def message(a: int, i: int) -> t.Message:
        return t.Message(role="user" if i % 2 == 0 else "assistant", message_id=f"m{i}",
                         content=f"Order {a}-{i}: the blue parcel for customer {a} leaves the Porto depot on "
                                 f"day {i + 1}; please confirm the delivery window with the courier.")

    def producer(w: int) -> None:
        mine = []
        with Client(url) as c:
            for i in range(per_agent):  # every agent's i-th message before anyone's (i+1)-th: agents interleave
                for a in range(w, agents, producers):
                    started = time.perf_counter()
                    try:
                        c.append_messages(names[a], f"chat-{a}", [message(a, i)])
                    except Exception as exc:  # counted and reported
                        errors.append(repr(exc)[:200])
                    mine.append((time.perf_counter() - started) * 1000)
        with lock:
            appends.extend(mine)

    def reader() -> None:
        with Client(url) as c:
            while not done.is_set():
                started = time.perf_counter()
                try:
                    c.search(names[0], "chat-0", "parcel courier", mode="keyword", limit=5)
                except Exception as exc:
                    errors.append("read: " + repr(exc)[:200])
                reads.append((time.perf_counter() - started) * 1000)
                time.sleep(0.02)

    with Client(url) as c:  # the reader's discussion exists before the clock starts
        c.append_messages(names[0], "chat-0", [message(0, 0)])
    read_thread = threading.Thread(target=reader, daemon=True)
    read_thread.start()
    threads = [threading.Thread(target=producer, args=(w,)) for w in range(min(producers, agents))]
    started = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    appended_s = time.perf_counter() - started
    with Client(url) as c:
        idle = c.wait_idle(timeout=3600)
        seconds = time.perf_counter() - started
        done.set()
        read_thread.join()
        lag = lags(c)
        status = c.status()
        heads = sum(s.head for s in status.shards)
        shards = [{"shard": s.shard, "resident_agents": s.resident_agents,
                   "projection_seconds": {name: [round(t.get("fold_s", 0), 1), round(t.get("checkpoint_s", 0), 1)]
                                          for name, t in sorted(s.projection_timings.items()) if name != "(log)"}}
                  for s in status.shards]
    messages = agents * per_agent
    return {"agents": agents, "messages": messages, "producers": min(producers, agents),
            "append_seconds": round(appended_s, 2), "seconds": round(seconds, 2), "all_memory_written": idle,
            "messages_per_s": round(messages / seconds, 1), "append_p50_ms": pct(appends, 0.5),
            "append_p99_ms": pct(appends, 0.99), "read_during_ingest": {"requests": len(reads),
            "p50_ms": pct(reads, 0.5), "p99_ms": pct(reads, 0.99)}, "lag": lag, "events_in_log": heads,
            "errors": len(errors), "error_examples": errors[:3], "shard_state": shards}


def run_one(agents: int, per_agent: int, producers: int, shards: int = 1, cluster_address: str | None = None) -> dict:
    home = Path(tempfile.mkdtemp(prefix="engram-scale-"))
    config: dict = {"shards": shards}
    if RESIDENT_AGENTS:
        config.setdefault("ray", {})["residentAgents"] = RESIDENT_AGENTS
    if SHARD_RESIDENT_AGENTS:
        config.setdefault("ray", {})["shardResidentAgents"] = SHARD_RESIDENT_AGENTS
    if cluster_address:
        config["cluster"] = {"nodes": {n: [s for s in range(shards) if s % len(NODES) == i] for i, n in enumerate(NODES)}}
        config["cluster"]["nodes"] = {n: v for n, v in config["cluster"]["nodes"].items() if v}
    (home / "engram.json").write_text(json.dumps(config))
    (home / "_DiscussionId-MemoryFile-Workflow-Settings.json").write_text(json.dumps(SETTINGS))
    env = {**os.environ, "ENGRAM_HOME": str(home)}
    env.pop("RAY_ADDRESS", None)
    if cluster_address:
        env["RAY_ADDRESS"] = cluster_address
    try:
        instance = start_server(home, env)
        with PeakRss([instance["pid"]] + ([os.getpid()] if cluster_address else [])) as rss:
            report = ingest(instance["url"], agents, per_agent, producers)
            names = process_names(home) if not cluster_address else {}
            report["cpu_seconds_by_process"] = tree_cpu([instance["pid"]], names=names)
            report["rss_mb_by_process_at_end"] = tree_cpu([instance["pid"]], rss=True, names=names)
        report["peak_rss_mb_by_process"] = rss.named(names)
        subprocess.run([ENGRAM, "down"], capture_output=True, env=env, timeout=300)
        computed = cache_rows(home)
        report.update({"shards": shards, "peak_rss_mb": round(rss.peak, 1),
                       "embeddings_per_message": None if computed is None else round(computed / report["messages"], 3)})
        print(json.dumps(report), file=sys.stderr, flush=True)  # each run as it ends (the whole report at the end)
        return report
    finally:
        subprocess.run([ENGRAM, "down"], capture_output=True, env=env, timeout=300)
        shutil.rmtree(home, ignore_errors=True)


def cluster_runs(agents: int, per_agent: int, producers: int, shard_counts: list[int]) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from engram.runtime.startup import private_ray_temp

    temp = private_ray_temp(Path("/tmp") / f"eg-scale-{os.getpid()}")  # nothing under a shared $TMPDIR/ray
    res = lambda node: {f"engram-shard-{s:03d}": 1 for s in range(max(shard_counts)) if s % len(NODES) == NODES.index(node)}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": res("head"), "temp_dir": str(temp)})
    for node in NODES[1:]:
        cluster.add_node(num_cpus=1, resources=res(node), temp_dir=str(temp))
    cluster.wait_for_nodes()
    try:
        runs = [run_one(agents, per_agent, producers, shards=s, cluster_address=cluster.address) for s in shard_counts]
    finally:
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    base = runs[0]["messages_per_s"]
    return {"nodes": len(NODES), "agents": agents, "runs": runs,
            "scaling_ratio": {str(r["shards"]): round(r["messages_per_s"] / base, 2) for r in runs}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", default="10,100,1000")
    parser.add_argument("--shards", default="1,2,4")
    parser.add_argument("--per-agent", type=int, default=4)
    parser.add_argument("--producers", type=int, default=16)
    parser.add_argument("--cluster-agents", type=int, default=100)
    parser.add_argument("--no-cluster", action="store_true")
    parser.add_argument("--resident-agents", type=int, default=None)
    parser.add_argument("--shard-resident-agents", type=int, default=None)
    args = parser.parse_args()
    global RESIDENT_AGENTS, SHARD_RESIDENT_AGENTS
    RESIDENT_AGENTS = args.resident_agents
    SHARD_RESIDENT_AGENTS = args.shard_resident_agents
    load_at_start = round(os.getloadavg()[0], 2)
    single = [run_one(int(a), args.per_agent, args.producers) for a in args.agents.split(",")]
    report = {"benchmark": "scale", "machine": {"cpus": os.cpu_count(), "load_avg_1m_at_start": load_at_start},
              "provider": "offline heuristic (offline-heuristic-v1), MiniLM int8 ONNX embedder",
              "settings": SETTINGS, "per_agent_messages": args.per_agent, "resident_agents": RESIDENT_AGENTS,
              "shard_resident_agents": SHARD_RESIDENT_AGENTS,
              "one_machine": single}
    if not args.no_cluster:
        report["simulated_cluster"] = cluster_runs(args.cluster_agents, args.per_agent, args.producers,
                                                   [int(s) for s in args.shards.split(",")])
    report["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

"""A simulated three-node Ray cluster (`ray.cluster_utils.Cluster`) running one engram home of three shards.

Run in a process of its own (`python -m tests.cluster.scenario DIR`): Ray joins one cluster per process and the
test session's own local instance already runs in pytest's. Prints what it observed as JSON; the tests in
`test_cluster.py` assert on it. Actor counts are kept small (one Summarizer per shard) for two cores.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from pathlib import Path

NODES = {"head": [0], "left": [1], "right": [2]}


def resources(shards):
    return {f"engram-shard-{s:03d}": 1 for s in shards}


def agent_on(layout, shard: int, prefix: str = "agent") -> str:
    return next(f"{prefix}-{i}" for i in range(10_000) if layout.shard_of(f"{prefix}-{i}") == shard)


def node_ids_by_resource(ray) -> dict[str, str]:
    return {r: n["NodeID"] for n in ray.nodes() if n["Alive"] for r in n["Resources"] if r.startswith("engram-shard-")}


def wait_until(check, timeout=120.0, every=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception:  # the actor is still restarting
            pass
        time.sleep(every)
    raise TimeoutError("condition not met in time")


def main(root: Path) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.ray_runtime import RayRuntime
    from engram.runtime.startup import private_ray_temp
    from tests.events.helpers import write

    # Short (Ray's socket paths must stay below 108 bytes) and this run's own: the nodes' temp dir, and the
    # cluster's address file, which `Cluster` would otherwise write to a shared `$TMPDIR/ray` (see private_ray_temp).
    temp = private_ray_temp(Path("/tmp") / f"eg-cl-{root.name[-8:]}")
    began = time.monotonic()
    seconds: dict[str, float] = {}  # where the scenario's time goes, for whoever tunes the suite's time

    def lap(name: str) -> None:
        seconds[name] = round(time.monotonic() - began - sum(seconds.values()), 2)

    # No dashboard: nothing here reads it, and its processes cost start-up time on two shared cores.
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": resources(NODES["head"]),
                                                             "temp_dir": str(temp), "include_dashboard": False})
    workers = {name: cluster.add_node(num_cpus=1, resources=resources(NODES[name]), temp_dir=str(temp))
               for name in ("left", "right")}
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="engram-cluster-test", log_to_driver=False)
    lap("three_nodes")
    out: dict = {}
    home = root / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"shards": 3, "cluster": {"nodes": NODES}, "ray": {"pools": {"summarizer": 1}}}))
    rt = RayRuntime(load_service_config(home)).start()
    mem = Engram(rt)
    lap("runtime")
    try:
        agents = [agent_on(rt.layout, s) for s in range(3)]
        mem.append([write(f"d-{a}", range(0, 5), agent=a) for a in agents])
        # Placement: each shard's actor on the node offering its resource.
        expected = node_ids_by_resource(ray)
        shards = [rt.shard(s) for s in range(3)]
        out["expected_nodes"] = [expected[f"engram-shard-{s:03d}"] for s in range(3)]
        out["shard_nodes"] = [w["node_id"] for w in ray.get([h.where.remote() for h in shards])]
        rt.start_policies()
        status = rt.shard_status()
        out["status_nodes"] = [st["node"] for st in status]
        out["actor_nodes"] = {st["shard"]: sorted(set(st["actors"].values())) for st in status}
        out["layout_nodes"] = json.loads((home / "layout.json").read_text())["nodes"]
        lap("placement_and_policies")
        # An actor restart: back on the same node, with its log.
        pid = ray.get(shards[1].where.remote())["pid"]
        ray.kill(shards[1], no_restart=False)
        where = wait_until(lambda: (w := ray.get(shards[1].where.remote(), timeout=5)) and w["pid"] != pid and w)
        out["restarted_node"] = where["node_id"]
        out["restarted_head"] = ray.get(shards[1].head.remote())
        lap("actor_restart")

        # A worker node removed mid-ingest: every acknowledged append survives.
        victim = agents[2]
        acked: list[str] = []
        failures: list[str] = []
        stop = threading.Event()

        def ingest():
            # A producer that stops only between messages: one whose append failed (its reply lost, the write
            # perhaps in) retries it with the same id until it is acknowledged, so every logged id is acked.
            i, retrying, deadline = 5, False, None
            while i < 400 and (retrying or not stop.is_set()):
                if stop.is_set():
                    deadline = deadline or time.monotonic() + 120
                    if time.monotonic() > deadline:
                        break
                try:
                    res = mem.append([write(f"d-{victim}", range(i, i + 1), agent=victim)])
                    acked.append(f"m{i}")  # acknowledged: the append returned
                    assert res[0].seqs
                    i, retrying = i + 1, False
                except Exception as exc:  # the node is gone: not acknowledged, retried with the same id
                    failures.append(type(exc).__name__)
                    retrying = True
                    time.sleep(0.2)

        rt.call_timeout_s = 5.0
        thread = threading.Thread(target=ingest)
        thread.start()
        wait_until(lambda: len(acked) >= 20, timeout=60)
        cluster.remove_node(workers["right"], allow_graceful=False)
        out["acked_before_loss"] = len(acked)
        time.sleep(3)
        workers["right"] = cluster.add_node(num_cpus=1, resources=resources(NODES["right"]), temp_dir=str(temp))
        wait_until(lambda: len(acked) >= out["acked_before_loss"] + 20, timeout=180)
        stop.set()
        thread.join()
        out["failures_while_lost"] = len(failures)
        out["acked"] = len(acked)
        messages = mem.read(victim, stream=f"d-{victim}", types=["MessageAppended"], limit=None)
        logged = [r.event_id for r in messages]
        out["acked_missing"] = sorted(set(acked) - set(logged))
        out["logged_ids"] = len(set(logged))
        out["duplicated"] = len(logged) - len(set(logged))
        out["in_order"] = [int(i[1:]) for i in logged] == sorted(int(i[1:]) for i in logged)
        out["node_after_return"] = ray.get(rt.shard(2).where.remote())["node_id"]
        out["expected_after_return"] = node_ids_by_resource(ray)["engram-shard-002"]
        lap("node_loss_and_return")
        assert mem.wait_idle(timeout=240)
        lap("memory_caught_up")
        out["replay_differences"] = rt.verify_replay(rt.all_shards())
        lap("replay")
    finally:
        mem.close()
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        lap("shutdown")
        out["seconds"] = seconds
    return out


if __name__ == "__main__":
    print("SCENARIO " + json.dumps(main(Path(sys.argv[1]))))

"""The front door's latency: /recall and /search under concurrent clients, and commands as a user runs them.

    .venv/bin/python bench/serve.py [--clients 8] [--requests 400]

Starts a server for a fresh home (`engram serve` in the background, on Ray, as the first command does),
ingests the sample conversation, then measures:
- `POST /v1/agents/{agent}/recall` and `POST /v1/agents/{agent}/discussions/{id}/search` p50/p99 with N
  concurrent clients (each its own kept-alive connection), target p99 <= 20 ms at 8 clients;
- the wall time of `engram recall "…"` and `engram status` as commands with the server up, Python start
  included (target <= 0.5 s each);
- `POST /v1/chat/completions` with a `[DiscussionId]` (the OpenAI-compatible memory proxy; the offline
  responder, so no model time) with 1, 8 and 32 concurrent clients, each a front-end resending its whole
  history every turn: p50/p99 of the request and of the memory work inside it (`X-Engram-Memory-Ms`),
  target p99 <= 25 ms at 8 clients.
Prints one JSON object. Run it under the shared lock: it starts Ray.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "engram" / "samples" / "acme-dashboard.jsonl"
AGENT = "priya"
DISCUSSION = "acme-dashboard"
QUERIES = ["Which CSS approach does Priya dislike?", "When is the launch?", "Who handles the Postgres schema?",
           "What charting library renders the graphs?", "Where is Priya going after launch?"]
KEYWORDS = ["Supabase;deadline", "billing page", "charts;Recharts", "auth;RLS", "launch;Porto"]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(q * (len(values) - 1))))], 2)


def load(url: str, clients: int, per_client: int, call) -> dict:
    from engram.client import Client

    latencies: list[float] = []
    lock = threading.Lock()
    errors = []

    def worker(i: int) -> None:
        with Client(url) as c:
            mine = []
            for j in range(per_client):
                started = time.perf_counter()
                try:
                    call(c, i * per_client + j)
                except Exception as exc:  # counted, reported
                    errors.append(repr(exc))
                mine.append((time.perf_counter() - started) * 1000)
            with lock:
                latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - started
    return {"clients": clients, "requests": len(latencies), "errors": len(errors), "error_examples": errors[:3],
            "p50_ms": pct(latencies, 0.5),
            "p99_ms": pct(latencies, 0.99), "mean_ms": round(statistics.mean(latencies), 2),
            "throughput_rps": round(len(latencies) / wall, 1)}


def chat_load(url: str, clients: int, turns: int) -> dict:
    """`clients` front-ends, each its own discussion and connection, resending the whole history every turn."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    latencies: list[float] = []
    memory: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        tag = f"[DiscussionId]bench-chat-{clients}-{i}[/DiscussionId]"
        history = [{"role": "system", "content": f"You are a helpful assistant. {tag}"}]
        mine, mem = [], []
        for j in range(turns):
            history.append({"role": "user", "content": QUERIES[(i + j) % len(QUERIES)] + f" (turn {j})"})
            body = json.dumps({"model": f"engram/{AGENT}", "messages": history})
            started = time.perf_counter()
            try:
                conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                mine.append((time.perf_counter() - started) * 1000)
                if resp.status != 200:
                    errors.append(f"{resp.status} {raw[:200]!r}")
                    history.pop()
                    continue
                mem.append(float(resp.getheader("X-Engram-Memory-Ms")))
                history.append({"role": "assistant", "content": json.loads(raw)["choices"][0]["message"]["content"]})
            except Exception as exc:  # counted, reported
                errors.append(repr(exc))
                conn.close()
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        conn.close()
        with lock:
            latencies.extend(mine)
            memory.extend(mem)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - started
    return {"clients": clients, "requests": len(latencies), "errors": len(errors), "error_examples": errors[:3],
            "turns_per_client": turns, "p50_ms": pct(latencies, 0.5), "p99_ms": pct(latencies, 0.99),
            "memory_work_p50_ms": pct(memory, 0.5) if memory else None,
            "memory_work_p99_ms": pct(memory, 0.99) if memory else None,
            "throughput_rps": round(len(latencies) / wall, 1)}


def command_wall(home: Path, *args: str, runs: int) -> dict:
    env = {**os.environ, "ENGRAM_HOME": str(home)}
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        out = subprocess.run([str(ROOT / ".venv" / "bin" / "engram"), *args], capture_output=True, text=True, env=env)
        walls.append(time.perf_counter() - started)
        assert out.returncode == 0, out.stderr
    return {"command": "engram " + " ".join(a if " " not in a else f'"{a}"' for a in args), "runs": runs,
            "median_s": round(statistics.median(walls), 3), "max_s": round(max(walls), 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400, help="requests per measurement (split over the clients)")
    parser.add_argument("--command-runs", type=int, default=10)
    parser.add_argument("--chat-requests", type=int, default=160, help="chat completions per concurrency level")
    args = parser.parse_args()

    from engram.client import Client

    home = Path(tempfile.mkdtemp(prefix="engram-bench-serve-"))
    # The offline responder answers the proxy (no model time): no Anthropic key reaches the server.
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"} | {"ENGRAM_HOME": str(home)}
    started = time.perf_counter()
    ingest = subprocess.run([str(ROOT / ".venv" / "bin" / "engram"), "ingest", str(SAMPLE), "--agent", AGENT],
                            capture_output=True, text=True, env=env)
    assert ingest.returncode == 0, ingest.stderr
    first_command_s = time.perf_counter() - started
    url = json.loads((home / "instance.json").read_text())["url"]
    try:
        with Client(url) as c:  # warm: the query embedder loads on the first search/recall
            c.recall(AGENT, QUERIES[0], discussion=DISCUSSION)
            c.search(AGENT, DISCUSSION, KEYWORDS[0])
        per = max(1, args.requests // args.clients)
        recall = load(url, args.clients, per, lambda c, i: c.recall(AGENT, QUERIES[i % len(QUERIES)],
                                                                   discussion=DISCUSSION, limit=5))
        search = load(url, args.clients, per, lambda c, i: c.search(AGENT, DISCUSSION, KEYWORDS[i % len(KEYWORDS)],
                                                                   mode="hybrid", limit=5))
        single = load(url, 1, per, lambda c, i: c.recall(AGENT, QUERIES[i % len(QUERIES)], discussion=DISCUSSION, limit=5))
        chat = {f"clients_{n}": chat_load(url, n, max(3, args.chat_requests // n)) for n in (1, 8, 32)}
        commands = [command_wall(home, "recall", QUERIES[1], "--agent", AGENT, runs=args.command_runs),
                    command_wall(home, "status", runs=args.command_runs)]
    finally:
        subprocess.run([str(ROOT / ".venv" / "bin" / "engram"), "down"], capture_output=True, env=env)
    print(json.dumps({
        "benchmark": "serve",
        "machine": {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)},
        "first_command_with_server_start_s": round(first_command_s, 1),
        "recall": {**recall, "target_p99_ms": 20}, "recall_one_client": single,
        "search": {**search, "target_p99_ms": 20},
        "commands_with_server_up": [{**c, "target_s": 0.5} for c in commands],
        "chat_completions": {**chat, "responder": "offline (labelled heuristic, no model time)",
                             "target_p99_ms_at_8": 25},
    }, indent=1))


if __name__ == "__main__":
    main()

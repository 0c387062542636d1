"""Benchmark of the LLM endpoint layer against a real llama.cpp server (llama-cpp-python, the tiny test model).
Prints one JSON object.

    python bench/llm_endpoints.py [--tasks N] [--threads T]

Per apiType (openAIChatCompletion: JSON as json_object + schema after the json_schema refusal;
openAIV1Completion: JSON as a GBNF grammar): memory tasks per second through one endpoint at its concurrency
limit (maxConcurrentRequests 1; T threads queue on it), and how the structured answers came (first try,
after the repair request, labelled fallback) from the recorded `LlmCall`s. The model has random weights: what is
measured is engram's work and the server's constrained decoding, not answer quality. The proxy's overhead is
measured by the front doors' benchmark.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.config.llm import Endpoint, LlmConfig, Preset  # noqa: E402
from engram.providers.llm.endpoint_tasks import EndpointTasks  # noqa: E402
from engram.providers.llm.types import ChatLine  # noqa: E402
from tests.providers.endpoints.llama_server import LlamaServer  # noqa: E402

LINES = [ChatLine(role="user" if n % 2 == 0 else "assistant", seq=n + 1, ts_us=n,
                  content=f"Turn {n}: Ada is moving to Lisbon in May; she is allergic to peanuts.") for n in range(6)]
TASKS = ("summarize_chunk", "extract_memory", "observe", "extract_facts")


def run_one(tasks: EndpointTasks, name: str):
    if name == "summarize_chunk":
        return tasks.summarize_chunk(LINES)
    return getattr(tasks, name)(LINES)


def measure(url: str, api_type: str, count: int, threads: int) -> dict:
    endpoint = Endpoint(api_type=api_type, base_url=url, model="tiny", max_context_tokens=4096, chars_per_token=0.7,
                        max_concurrent_requests=1, max_retries=0, timeout_seconds=120)
    tasks = EndpointTasks(LlmConfig(endpoints={"default": endpoint},
                                    presets={"default": Preset(temperature=0, max_tokens=200)}), env={})
    run_one(tasks, "extract_memory")  # the structured way is detected once (json_schema refused), not timed
    results, latencies = [], []
    lock = threading.Lock()
    names = [TASKS[n % len(TASKS)] for n in range(count)]

    def worker(mine):
        for name in mine:
            t0 = time.perf_counter()
            r = run_one(tasks, name)
            with lock:
                latencies.append((time.perf_counter() - t0) * 1000)
                results.append(r)

    started = time.perf_counter()
    pool = [threading.Thread(target=worker, args=(names[k::threads],)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - started
    structured = [r.llm for r in results if r.llm.task != "summarize_chunk"]
    return {
        "api_type": api_type,
        "tasks": count,
        "threads": threads,
        "max_concurrent_requests": 1,
        "tasks_per_second": round(count / elapsed, 2),
        "latency_ms_p50": round(statistics.median(latencies), 1),
        "latency_ms_p99": round(sorted(latencies)[max(0, int(len(latencies) * 0.99) - 1)], 1),
        "structured_way": sorted({c.structured for c in structured if c.structured}),
        "structured_first_try": sum(1 for c in structured if not c.error and not c.repaired),
        "structured_after_repair": sum(1 for c in structured if not c.error and c.repaired),
        "structured_fallback": sum(1 for c in structured if c.error),
        "failed_other": sum(1 for r in results if r.llm.error and r.llm.task == "summarize_chunk"),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=24)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        server = LlamaServer(Path(d), n_ctx=4096).start()
        start_s = time.perf_counter() - t0
        try:
            out = {"server": "llama-cpp-python 0.3.36, tiny random-weight GGUF (64-d, 1 layer)",
                   "server_start_s": round(start_s, 2),
                   "endpoints": [measure(server.url, t, args.tasks, args.threads)
                                 for t in ("openAIChatCompletion", "openAIV1Completion")]}
        finally:
            server.stop()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

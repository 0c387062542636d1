"""Benchmark of the LLM endpoint layer against a real llama.cpp server (llama-cpp-python, the tiny test model).
Prints one JSON object.

    python bench/llm_endpoints.py [--tasks N] [--threads T]

Per apiType (openAIChatCompletion: JSON as json_object + schema after the json_schema refusal;
openAIV1Completion: JSON as a GBNF grammar): memory tasks per second through one endpoint at its concurrency
limit (maxConcurrentRequests 1; T threads queue on it), and how the structured answers came (first try,
after the repair request, labelled fallback) from the recorded `LlmCall`s. The model has random weights: what is
measured is engram's work and the server's constrained decoding, not answer quality.

`proxy_overhead`: the proxy's reply streamed from the same llama.cpp server through `engram serve` (its own process,
the in-process runtime, the shipped memory workflow: every request tagged, so memory is read and injected, and made
after the response), at 1 and C clients (`--clients`), each client its own discussion adding a turn per request.
In the same run, the same clients stream the same kind of request (system prompt and the conversation so far)
straight from the llama.cpp server: that first byte is the floor. Reported per client count: the upstream's own
first byte (p50/p99), engram's first byte, the overhead (engram's minus the upstream's, at each percentile), their
ratio, and engram's memory work before its first byte (`X-Engram-Memory-Ms`). llama-cpp-python serves one request
at a time: with several clients both floors include the queue.
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

from bench._common import pct, run_threads  # noqa: E402
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


REPLY_TOKENS = 8
PERSONA = "You are Ada's travel assistant."


def first_byte(url: str, body: dict, headers: dict | None = None) -> tuple[float, dict]:
    """Milliseconds until the first text of a streamed chat completion, and the response's headers."""
    import httpx

    t0 = time.perf_counter()
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers, timeout=300) as r:
        r.raise_for_status()
        ms = None
        for line in r.iter_lines():
            if ms is None and line.startswith("data: {") and '"content":"' in line.replace(" ", "") and \
                    '"content":""' not in line.replace(" ", ""):
                ms = (time.perf_counter() - t0) * 1000
        return (ms if ms is not None else (time.perf_counter() - t0) * 1000), dict(r.headers)


def proxy_overhead(llama_url: str, directory: Path, clients: int, rounds: int) -> dict:
    """First bytes straight from llama.cpp and through engram's proxy, at 1 and `clients` clients (see the docstring)."""
    from tests.server.helpers import ServerProcess

    home = directory / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"llm": {
        "endpoints": {"default": {"apiType": "openAIChatCompletion", "baseUrl": llama_url, "model": "tiny",
                                  "charsPerToken": 0.7, "maxContextTokens": 4096, "maxConcurrentRequests": 1,
                                  "timeoutSeconds": 300}},
        "presets": {"default": {"temperature": 0}}}}))
    out: dict = {"reply_tokens": REPLY_TOKENS, "rounds_per_client": rounds}
    with ServerProcess(home) as engram:
        for n in (1, clients):
            direct: list[float] = []
            proxied: list[float] = []
            memory: list[float] = []
            lock = threading.Lock()

            def worker(k: int, n=n, direct=direct, proxied=proxied, memory=memory, lock=lock) -> None:
                history = [{"role": "system", "content": f"{PERSONA} [DiscussionId]bench-{n}-{k}[/DiscussionId]"}]
                for r in range(rounds):
                    history.append({"role": "user", "content": f"Turn {r}: we land in Lisbon on the {r + 3}rd."})
                    plain = [{"role": "system", "content": PERSONA}] + history[1:]
                    d_ms, _ = first_byte(llama_url, {"model": "tiny", "messages": plain, "stream": True,
                                                     "max_tokens": REPLY_TOKENS, "temperature": 0})
                    e_ms, headers = first_byte(engram.url, {"model": "engram/ada", "messages": history, "stream": True,
                                                            "max_tokens": REPLY_TOKENS})
                    history.append({"role": "assistant", "content": f"Noted, turn {r}."})
                    with lock:
                        direct.append(d_ms)
                        proxied.append(e_ms)
                        memory.append(float(headers.get("x-engram-memory-ms", "nan")))

            run_threads(worker, n)
            row = {"upstream_first_byte_ms_p50": pct(direct, 0.5), "upstream_first_byte_ms_p99": pct(direct, 0.99),
                   "engram_first_byte_ms_p50": pct(proxied, 0.5), "engram_first_byte_ms_p99": pct(proxied, 0.99),
                   "memory_ms_before_first_byte_p50": pct(memory, 0.5),
                   "memory_ms_before_first_byte_p99": pct(memory, 0.99)}
            row["overhead_ms_p50"] = round(row["engram_first_byte_ms_p50"] - row["upstream_first_byte_ms_p50"], 2)
            row["overhead_ms_p99"] = round(row["engram_first_byte_ms_p99"] - row["upstream_first_byte_ms_p99"], 2)
            row["ratio_p50"] = round(row["engram_first_byte_ms_p50"] / row["upstream_first_byte_ms_p50"], 2)
            row["ratio_p99"] = round(row["engram_first_byte_ms_p99"] / row["upstream_first_byte_ms_p99"], 2)
            row["requests"] = len(proxied)
            out[f"clients_{n}"] = row
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=24)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6, help="requests per client in the proxy's overhead")
    ap.add_argument("--only-proxy", action="store_true", help="measure the proxy's overhead alone")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        server = LlamaServer(Path(d), n_ctx=4096).start()
        start_s = time.perf_counter() - t0
        try:
            out = {"server": "llama-cpp-python 0.3.36, tiny random-weight GGUF (64-d, 1 layer)",
                   "server_start_s": round(start_s, 2)}
            if not args.only_proxy:
                out["endpoints"] = [measure(server.url, t, args.tasks, args.threads)
                                    for t in ("openAIChatCompletion", "openAIV1Completion")]
            out["proxy_overhead"] = proxy_overhead(server.url, Path(d), args.clients, args.rounds)
        finally:
            server.stop()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

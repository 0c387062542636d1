"""The foundation's demo sections: what is in use, ingest, the log in SQL, status, replay."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Mapping

from engram.config.llm import LlmConfig
from engram.providers.llm.factory import make_tasks
from engram.providers.llm.offline.provider import OfflineTasks
from engram.providers.llm.routing import select_provider


def providers(demo) -> None:
    from engram.config.service import load_service_config

    demo.heading("What runs")
    health = demo.mem.server_info()
    print(f"server    {demo.mem.url} (pid {health.pid}), {health.runtime}; every command below is a client of it")
    print(describe_providers(load_service_config(demo.home)))


def ingest(demo) -> None:
    from engram.cli.ingest import prepare

    demo.heading("Ingest: the sample conversation goes into the event log")
    args = type("Args", (), {"agent": demo.agent, "files": [str(demo.sample)], "discussion": None, "format": None})()
    [(_, convs)] = prepare(args)
    res = demo.mem.append_conversations(demo.agent, convs)
    for r in res.results:
        print(f"$ engram ingest {demo.sample.name} --agent {demo.agent}")
        print(f"discussion {r.discussion!r} (from its [DiscussionId] tag): {len(r.seqs)} messages at seq "
              f"{r.seqs[0]}..{r.seqs[-1]}")
    again = demo.mem.append_conversations(demo.agent, convs)
    print(f"ingesting the same file again appends nothing: {sum(r.duplicates for r in again.results)} duplicates "
          "recognised by message id")
    demo.discussion = res.results[0].discussion
    demo.mem.wait_idle()


def log_sql(demo) -> None:
    demo.heading("The log is plain SQL")
    demo.sql("SELECT type, count(*) AS events FROM events GROUP BY type ORDER BY type")
    demo.sql("SELECT seq, ts, name, role, left(content, 60) AS content FROM messages ORDER BY seq LIMIT 5")
    demo.sql("SELECT discussion_id, agent, messages, tokens, first_ts, last_ts FROM discussions")


def status(demo) -> None:
    demo.heading("Status: heads, projection positions, lag")
    for sh in demo.mem.status().shards:
        print(json.dumps({"shard": sh.shard, "head": sh.head, "projections": sh.projections,
                          "projection_lag": sh.projection_lag}))


def replay(demo) -> None:
    from engram.cli.common import wait_job

    demo.heading("Replay: every projection rebuilt from the log into a fresh directory")
    out = Path(demo.home) / "exports" / f"replay-{int(time.time())}"  # jobs write under the home (or exportRoot)
    result = wait_job(demo.mem, demo.mem.replay(out=str(out)), "replay (shards)")
    for r in result["shards"]:
        print(f"shard {r['shard']}: {r['events']} events replayed in {r['seconds']}s into {out}")
    print("$ engram replay --verify   (replay into scratch space and compare with the live projections)")
    started = time.perf_counter()
    result = wait_job(demo.mem, demo.mem.replay(verify=True), "verify (shards)")
    print("live and replayed projections are identical (files byte for byte, tables row for row)"
          if result["identical"] else "DIFFERENCES:\n  " + "\n  ".join(result["differences"]))
    print(f"(verified in {time.perf_counter() - started:.1f}s)")


def describe_providers(service_config, env: Mapping[str, str] | None = None) -> str:
    """Two lines for `engram demo`: which LLM provider/model and which embedder are in use."""
    from engram.providers.embeddings.factory import describe_embedder

    config: LlmConfig = service_config.llm
    provider = select_provider(config, env)
    if provider != "offline":
        llm = make_tasks(config, env).describe()
    else:
        llm = OfflineTasks().describe()
        default = config.endpoints["default"]
        if config.provider == "auto" and default.api_type != "offline" and default.key_env:
            llm += f"; set {default.key_env} to use {default.model}"
    return f"LLM: {llm}\nEmbedder: {describe_embedder(service_config.embedder)}"

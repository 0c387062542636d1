"""The foundation's demo sections: what is in use, ingest, the log in SQL, status, replay."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import ray

from engram.client import now_us
from engram.ingest.formats import parse_file
from engram.ingest.messages import discussion_write


def providers(demo) -> None:
    demo.heading("What runs")
    rt = demo.mem.runtime
    mode = "local Ray instance started by engram (embedded default)" if rt.started_ray else f"Ray at {rt.address or 'the current session'}"
    print(f"runtime   {mode}; {demo.config.shards} shard(s), EventStore actors: "
          + ", ".join(rt.actor_name(f"shard-{i:03d}") for i in range(demo.config.shards)))
    try:
        from engram.llm.factory import describe_providers  # added by the LLM layer
    except ImportError:
        print("llm       (no LLM layer in this build)")
    else:
        print(describe_providers(demo.config))


def ingest(demo) -> None:
    demo.heading("Ingest: the sample conversation goes into the event log")
    convs = parse_file(demo.sample, now_us=now_us())
    writes = [
        discussion_write(demo.agent, c.discussion, c.messages, max_message_chars=demo.config.limits.max_message_chars)
        for c in convs
    ]
    demo.mem.sync_settings(demo.agent, ts_us=min(e.ts_us for w in writes if w for e in w.events))
    results = demo.mem.append([w for w in writes if w])
    for w, r in zip(writes, results):
        print(f"$ engram ingest {demo.sample.name} --agent {demo.agent}")
        print(f"discussion {w.stream!r} (from its [DiscussionId] tag): {len(r.seqs)} messages at seq {r.seqs[0]}..{r.seqs[-1]}")
    again = demo.mem.append([w for w in writes if w])
    print(f"ingesting the same file again appends nothing: {sum(r.duplicates for r in again)} duplicates recognised by message id")
    demo.discussion = writes[0].stream
    demo.mem.wait_projections()


def log_sql(demo) -> None:
    demo.heading("The log is plain SQL")
    demo.sql("SELECT type, count(*) AS events FROM events GROUP BY type ORDER BY type")
    demo.sql("SELECT seq, ts, name, role, left(content, 60) AS content FROM messages ORDER BY seq LIMIT 5")
    demo.sql("SELECT discussion_id, agent, messages, tokens, first_ts, last_ts FROM discussions")


def status(demo) -> None:
    demo.heading("Status: heads, projection positions, lag")
    for st in demo.mem.status():
        print(json.dumps({k: st[k] for k in ("shard", "head", "projections", "projection_lag")}))


def replay(demo) -> None:
    demo.heading("Replay: every projection rebuilt from the log into a fresh directory")
    demo.mem.wait_projections()
    out = Path(tempfile.mkdtemp(prefix="engram-replay-"))
    reports = ray.get([s.replay_into.remote(str(out)) for s in demo.mem.runtime.shards()])
    for r in reports:
        print(f"shard {r['shard']}: {r['events']} events replayed in {r['seconds']}s into {out}")
    print("$ engram replay --verify   (replay into scratch space and compare with the live projections)")
    diffs = [d for s in demo.mem.runtime.shards() for d in ray.get(s.verify_replay.remote())]
    print("live and replayed projections are identical (files byte for byte, tables row for row)"
          if not diffs else "DIFFERENCES:\n  " + "\n  ".join(diffs))

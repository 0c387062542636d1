"""The demo's discussion-memory section: the guide's workflow, the three files, a search, and a
delete-and-replay that gives the files back without an LLM call."""

from __future__ import annotations

import hashlib
import time
from importlib import resources
from pathlib import Path

WORKFLOW = "wilmer-memory-chat.workflow.json"
SUFFIXES = ("_memories.jsonl", "_summary.jsonl", "_vector_memory.db")


def _clip(text: str, width: int = 150) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def discussion_memory(demo) -> None:
    from datetime import timedelta

    from engram.api.types import Message
    from engram.cli.common import wait_job

    mem, agent, discussion = demo.mem, demo.agent, demo.discussion
    demo.heading("Discussion memory (WilmerAI): the guide's workflow on the demo discussion")
    started = time.perf_counter()
    mem.wait_idle()
    res = mem.memories(agent, discussion)
    print(f"the Summarizer (one logical actor per discussion, on a pool of actors) worked behind the ingest: "
          f"{res.total} chunk memories from the 45 messages (defaults: 1000 tokens / 5 messages / lookback 3), "
          f"ready {time.perf_counter() - started:.1f}s after this section started")
    path = Path(str(resources.files("engram.samples").joinpath(WORKFLOW)))
    question = "Before I forget: what did Marco and I agree about the deadline and the billing page?"
    _, rows = demo.query("SELECT max(ts) FROM messages WHERE discussion_id = ?", [discussion])
    from datetime import datetime

    last = rows[0][0]
    last_ts = datetime.fromisoformat(last) if isinstance(last, str) else last
    print(f"\na new user turn arrives: {question!r}")
    print(f"$ engram workflow run {path.name} --discussion {discussion} --messages turn.jsonl")
    out = mem.run_workflow(agent, text=path.read_text(), source=path.name, discussion=discussion,
                           messages=[Message(role="user", content=question, ts=last_ts + timedelta(minutes=1),
                                             message_id="demo-question-1")])
    print(f"response after {out.response_ms:.0f} ms (the memory creators after the WorkflowLock ran after it):")
    print(f"  {_clip(out.response, 300)}")
    print(f"the whole workflow took {out.total_ms / 1000:.1f}s:")
    for r in out.nodes:
        print(f"  {r.index}. {r.type:<27} {r.ms:6.0f} ms{'  (background)' if r.background else ''}"
              + (f"  {r.info}" if r.info else ""))

    demo.heading("The three files, under <projections>/agents/<agent>/Public/")
    public = demo.home / "projections" / "agents" / agent / "Public"
    files = {s: public / f"{discussion}{s}" for s in SUFFIXES}
    for p in files.values():
        print(f"  {p}  ({p.stat().st_size:,} bytes)" if p.exists() else f"  {p}  (not written)")
    res = mem.memories(agent, discussion)
    print(f"\n$ engram memories show {discussion}      ({res.total} chunk memories; the first two)")
    for m in res.memories[:2]:
        print(f"  {m.memory_id}: messages {m.first_message_id}..{m.last_message_id} ({m.message_count}), "
              f"{m.mode} mode, closed by the {m.trigger} threshold")
        print(f"    {_clip(m.summary)}")
    summary = mem.summary(agent, discussion).summary
    print(f"\n$ engram summary show {discussion}")
    if summary:
        print(f"  absorbed {summary.memories_absorbed} chunk memories, through {summary.absorbed_through}")
        print(f"    {_clip(summary.summary, 300)}")
    else:
        print("  (no rolling summary yet)")

    demo.heading("VectorMemorySearch: keywords separated by ';', OR logic, hybrid ranking")
    for query, mode in (("Supabase auth;deadline", "hybrid"), ("quantum chromodynamics", "keyword")):
        print(f"$ engram search \"{query}\" --discussion {discussion} --mode {mode} --limit 3")
        result = mem.search(agent, discussion, query, mode=mode, limit=3)
        if not result.hits:
            print(f"  {result.reason}")
        for h in result.hits:
            print(f"  {h['rank']}. {h['title']}  [{h['memory_id']}, messages {h['message_ids'][0]}..{h['message_ids'][-1]}]")
            print(f"     {_clip(h['summary'], 140)}")

    demo.heading("Delete the three files, then replay the discussion from the log (no LLM call)")
    before = {s: _digest(p) for s, p in files.items()}
    for p in files.values():
        p.unlink(missing_ok=True)
    print(f"$ rm {' '.join(p.name for p in files.values())}")
    print(f"$ engram replay --discussion {discussion}")
    result = wait_job(mem, mem.replay_discussion(agent, discussion), "replay (discussion)")
    print(f"  {result['events']} events replayed in {result['seconds']:.2f}s")
    for f in result["files"]:
        if f["status"] == "absent":
            continue
        p = Path(f["path"])
        suffix = next(s for s in SUFFIXES if p.name.endswith(s))
        same = _digest(p) == before[suffix]
        print(f"  {p.name}: {f['status']}; " + ("identical to the deleted file, byte for byte" if same else
              "rebuilt (a DuckDB file: compared row for row by `engram replay --discussion ID --verify`)"))
    check = wait_job(mem, mem.replay_discussion(agent, discussion, verify=True), "verify (discussion)")
    print("$ engram replay --discussion " + discussion + " --verify\n  "
          + "; ".join(f"{Path(f['path']).name}: {f['status']}" for f in check["files"] if f["status"] != "absent"))
    demo.notes.append(f"ENGRAM_HOME={demo.home} .venv/bin/engram search \"deadline;Marco\" --discussion {discussion}")

"""The demo's discussion-memory section: the guide's workflow, the three files, a search, and a
delete-and-replay that gives the files back byte for byte without an LLM call."""

from __future__ import annotations

import shutil
import tempfile
import time
from importlib import resources
from pathlib import Path

import duckdb

from engram.discussion import search as vsearch
from engram.discussion.files import MEMORIES_SUFFIX, SUFFIXES, SUMMARY_SUFFIX, VECTOR_SUFFIX, read_memories, read_summary
from engram.discussion.rebuild import _same, rebuild_discussion
from engram.discussion.runtime import EngramMemory
from engram.discussion.workflow import ChatMessage, Responder, RunContext, load
from engram.discussion.workflow import run as run_workflow
from engram.ingest.messages import IncomingMessage, discussion_write

WORKFLOW = "wilmer-memory-chat.workflow.json"


def _clip(text: str, width: int = 150) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _members(mem) -> list:
    return [k for k in mem.runtime.policies() if k[0] == "summarizer"]


def discussion_memory(demo) -> None:
    from engram.llm.factory import make_tasks

    mem, agent, discussion = demo.mem, demo.agent, demo.discussion
    memory = EngramMemory(mem, agent)

    demo.heading("Discussion memory (WilmerAI): the guide's workflow on the demo discussion")
    started = time.perf_counter()
    mem.wait_idle()
    counts = memory.counts(discussion)
    print(f"the Summarizer (one logical actor per discussion, on a pool of {len(_members(mem))} Ray actors) worked "
          f"behind the ingest: {counts['memories']} chunk memories and {counts['vector_memories']} vector memories "
          f"from the 45 messages (defaults: 1000 tokens / 5 messages / lookback 3), "
          f"ready {time.perf_counter() - started:.1f}s after this section started")
    path = Path(str(resources.files("engram.samples").joinpath(WORKFLOW)))
    workflow = load(path)
    question = "Before I forget: what did Marco and I agree about the deadline and the billing page?"
    last_ts = mem.read(agent, stream=discussion, types=["MessageAppended"], limit=None)[-1].ts_us
    write = discussion_write(agent, discussion, [IncomingMessage(role="user", content=question, ts_us=last_ts + 60_000_000,
                                                                 message_id="demo-question-1")],
                             max_message_chars=demo.config.limits.max_message_chars)
    mem.append([write])
    warm = time.perf_counter()
    memory.embed(["warm up"])  # a server loads the query embedder once, at start
    print(f"(query embedder {memory.embedding_model} loaded in {(time.perf_counter() - warm) * 1000:.0f} ms, as a server does at start)")
    print(f"\na new user turn arrives: {question!r}")
    print(f"$ engram workflow run {path.name} --discussion {discussion} --messages turn.jsonl")
    print("  nodes: " + " -> ".join(f"{n.kind}" for n in workflow.nodes))
    records = mem.read(agent, stream=discussion, types=["MessageAppended"], limit=None)
    messages = [ChatMessage(r.event.role, r.event.content, r.event.name, r.event.message_id, r.seq, r.ts_us)
                for r in records]
    run = run_workflow(workflow, RunContext(discussion=discussion, messages=messages, memory=memory,
                                            responder=Responder(make_tasks(demo.config.llm))))
    print(f"response after {run.response_seconds * 1000:.0f} ms (the memory creators after the WorkflowLock are still running):")
    print(f"  {_clip(run.response, 300)}")
    started = time.perf_counter()
    run.wait()
    print(f"background memory work finished {time.perf_counter() - started:.1f}s later:")
    for r in run.results:
        print(f"  {r.index + 1}. {r.kind:<27} {r.seconds * 1000:6.0f} ms{'  (background)' if r.background else ''}"
              + (f"  {r.info}" if r.info else ""))

    demo.heading("The three files, under <projections>/agents/<agent>/Public/")
    files = {s: memory.path(discussion, s) for s in SUFFIXES}
    for s, p in files.items():
        print(f"  {p}  ({p.stat().st_size:,} bytes)" if p.exists() else f"  {p}  (not written)")
    memories = read_memories(files[MEMORIES_SUFFIX]) or []
    print(f"\n$ engram memories show {discussion}      ({len(memories)} chunk memories; the first two)")
    for m in memories[:2]:
        print(f"  {m['memory_id']}: messages {m['first_message_id']}..{m['last_message_id']} ({m['message_count']}), "
              f"{m['mode']} mode, closed by the {m['trigger']} threshold")
        print(f"    {_clip(m['summary'])}")
    summary = read_summary(files[SUMMARY_SUFFIX])
    print(f"\n$ engram summary show {discussion}")
    if summary:
        print(f"  absorbed {summary['memories_absorbed']} chunk memories, through {summary['absorbed_through']}")
        print(f"    {_clip(summary['summary'], 300)}")
    else:
        print("  (no rolling summary yet)")
    con = duckdb.connect(str(files[VECTOR_SUFFIX]), read_only=True)
    try:
        tables = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("memories", "embeddings", "hnsw_index", "store_info")}
        model = con.execute("SELECT value FROM store_info WHERE key = 'embedding_model'").fetchone()[0]
    finally:
        con.close()
    print(f"\n{files[VECTOR_SUFFIX].name}: " + ", ".join(f"{t} {n} row(s)" for t, n in tables.items())
          + f"; embeddings by {model}")

    demo.heading("VectorMemorySearch: keywords separated by ';', OR logic, hybrid ranking")
    store = memory.open_store(discussion)
    for query, mode in (("Supabase auth;deadline", "hybrid"), ("quantum chromodynamics", "keyword")):
        print(f"$ engram search \"{query}\" --discussion {discussion} --mode {mode} --limit 3")
        result = vsearch.search(store, query, discussion=discussion, limit=3, mode=mode, embed=memory.embed,
                                embedding_model=memory.embedding_model)
        if not result.hits:
            print(f"  {result.reason}")
        for h in result.hits:
            print(f"  {h.rank}. {h.memory.title}  [{h.memory.memory_id}, messages {h.memory.message_ids[0]}.."
                  f"{h.memory.message_ids[-1]}]")
            print(f"     {_clip(h.memory.summary, 140)}")

    demo.heading("Delete the three files, then replay the discussion from the log (no LLM call)")
    saved = Path(tempfile.mkdtemp(prefix="engram-demo-saved-"))
    try:
        for p in files.values():
            if p.exists():
                shutil.copyfile(p, saved / p.name)
                p.unlink()
        print(f"$ rm {' '.join(p.name for p in files.values())}")
        print(f"$ engram replay --discussion {discussion}")
        records = mem.read(agent, stream=discussion, limit=None)
        started = time.perf_counter()
        reports = rebuild_discussion(records, memory.paths, agent, discussion)
        print(f"  {len(records)} events replayed in {time.perf_counter() - started:.2f}s")
        for r in reports:
            if r.status == "absent":
                continue
            before = saved / r.path.name
            same = before.exists() and _same(before, r.path)
            how = "row for row, HNSW index bytes included" if r.path.name.endswith(".db") else "byte for byte"
            print(f"  {r.path.name}: {r.status}; {'identical to the deleted file (' + how + ')' if same else 'DIFFERS from the deleted file'}")
    finally:
        shutil.rmtree(saved, ignore_errors=True)
    demo.notes.append(f"ENGRAM_HOME={demo.config.home} .venv/bin/engram search \"deadline;Marco\" --discussion {discussion}")

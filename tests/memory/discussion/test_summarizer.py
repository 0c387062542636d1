"""The per-discussion Summarizer on a real log: thresholds in context, generations, summaries, restarts."""

from __future__ import annotations

import json

import pytest
from tests.memory.discussion.conftest import AGENT, T0, events, ingest, messages, write_settings
from tests.memory.discussion.engine import LocalMemory

from engram.events.control import GenerationStarted
from engram.events.envelope import NewEvent, Write
from engram.memory.discussion.files import MEMORIES_SUFFIX, SUMMARY_SUFFIX, VECTOR_SUFFIX, read_memories, read_summary
from engram.memory.ingest.formats import parse_file
from engram.memory.ingest.messages import IncomingMessage
from engram.memory.settings import discussion_settings_event

SAMPLE = "engram/samples/acme-dashboard.jsonl"


def memories_of(engine, discussion):
    return read_memories(engine.paths.discussion_file(AGENT, discussion, MEMORIES_SUFFIX))


def test_the_demo_conversation_gets_memories_with_the_default_settings(engine):
    conv = parse_file(SAMPLE, now_us=0)[0]
    ingest(engine, conv.discussion, conv.messages)
    lines = memories_of(engine, "acme-dashboard")
    # 45 messages, defaults 1000 tokens / 5 messages / lookback 3: eight chunks of five messages.
    assert [m["message_count"] for m in lines] == [5] * 8
    assert {m["trigger"] for m in lines} == {"messages"} and {m["mode"] for m in lines} == {"standard"}
    created = events(engine, "acme-dashboard", "MemoryFileCreated")
    assert [(e.event.store, e.event.message_count) for e in created] == [("memories", 3), ("vector", 3)]
    assert all(line["llm"]["model"].startswith("offline-heuristic") for line in lines)


def test_no_message_is_dropped_or_summarised_twice_and_memories_stay_in_order(engine):
    ingest(engine, "d1", messages(37, tokens=23))
    lines = memories_of(engine, "d1")
    covered = [i for m in lines for i in m["message_ids"]]
    assert covered == [f"m{i}" for i in range(len(covered))]  # each once, in order, from the first
    assert 37 - 3 - len(covered) < 5  # what is left is the lookback and a partial chunk
    assert [m["first_seq"] for m in lines] == sorted(m["first_seq"] for m in lines)
    assert all(a["last_seq"] < b["first_seq"] for a, b in zip(lines, lines[1:]))


def test_new_messages_are_decided_by_position_so_repeated_text_counts_again(engine):
    same = [IncomingMessage(role="user", content="ok", ts_us=T0 + i, message_id=f"same{i}") for i in range(13)]
    ingest(engine, "echo", same)
    lines = memories_of(engine, "echo")
    assert [m["message_ids"] for m in lines] == [[f"same{i}" for i in range(5)], [f"same{i}" for i in range(5, 10)]]


def test_the_memory_file_exists_from_the_first_check_around_the_third_message(engine):
    ingest(engine, "young", messages(2))
    path = engine.paths.discussion_file(AGENT, "young", MEMORIES_SUFFIX)
    assert not path.exists() and not events(engine, "young", "MemoryFileCreated")
    ingest(engine, "young", messages(1, start=2))
    assert path.exists() and path.read_bytes() == b""  # created empty, as WilmerAI creates `[]`


def test_ingesting_at_once_or_message_by_message_gives_the_same_memories(engine):
    msgs = messages(14, tokens=70)
    ingest(engine, "batch", msgs)
    for m in msgs:
        ingest(engine, "drip", [m])
    strip = lambda lines: [(m["message_ids"], m["trigger"], m["mode"], m["summary"]) for m in lines]
    assert strip(memories_of(engine, "batch")) == strip(memories_of(engine, "drip"))


def test_vector_memories_have_their_own_thresholds(engine):
    write_settings(engine.home.root, vectorMemoryMaxMessagesBetweenChunks=2, vectorMemoryLookBackTurns=1,
                   maxMessagesBetweenChunks=4, lookbackStartTurn=0)
    ingest(engine, "v", messages(9))
    stored = [e.event for e in events(engine, "v", "VectorMemoryStored")]
    assert [len(e.message_ids) for e in stored] == [2, 2, 2, 2]  # 9 - 1 lookback = 8 eligible
    assert [m["message_count"] for m in memories_of(engine, "v")] == [4, 4]
    assert all(e.embedding_model and e.title and e.summary for e in stored)


def test_use_vector_for_quality_memory_false_makes_no_vector_memories(engine):
    write_settings(engine.home.root, useVectorForQualityMemory=False)
    ingest(engine, "files-only", messages(20))
    assert not events(engine, "files-only", "VectorMemoryStored")
    assert not engine.paths.discussion_file(AGENT, "files-only", VECTOR_SUFFIX).exists()
    assert len(memories_of(engine, "files-only")) == 3


def test_settings_recorded_later_apply_from_their_position_on(engine):
    ingest(engine, "s", messages(13))  # chunks of 5: m0-m4, m5-m9
    write_settings(engine.home.root, maxMessagesBetweenChunks=2)
    ingest(engine, "s", messages(6, start=13))  # m10.. now in chunks of 2
    assert [m["message_count"] for m in memories_of(engine, "s")] == [5, 5, 2, 2, 2]


def _regenerate(engine, discussion, generation, settings_path=None):
    evs = []
    if settings_path is not None:
        ev = discussion_settings_event(settings_path)
        evs.append(NewEvent(ev, T0 + 10**9, f"settings:regen:{generation}"))
    evs.append(NewEvent(GenerationStarted(generation=generation, reason="test"), T0 + 10**9, f"generation:{generation}"))
    engine.append([Write(discussion, AGENT, tuple(evs))])
    engine.settle()


def test_regeneration_rederives_everything_in_consolidation_mode_and_supersedes_the_old(engine, tmp_path):
    ingest(engine, "r", messages(28, tokens=25))
    old = memories_of(engine, "r")
    assert len(old) == 5
    bigger = tmp_path / "bigger.json"
    bigger.write_text(json.dumps({"chunkEstimatedTokenSize": 200, "vectorMemoryChunkEstimatedTokenSize": 200}))
    _regenerate(engine, "r", 1, bigger)
    new = memories_of(engine, "r")
    # Consolidation: only the token threshold (200 tokens = 8 messages of 25), lookback 3 kept out.
    assert [m["message_count"] for m in new] == [8, 8, 8]
    assert {(m["mode"], m["trigger"], m["generation"]) for m in new} == {("consolidation", "tokens", 1)}
    assert len(events(engine, "r", "ChunkSummarized")) == len(old) + len(new)  # the old events stay
    store = LocalMemory(engine, AGENT).open_store("r")
    assert {m.generation for m in store.rows} == {1} and len(store) == 3
    # The file exists again from that check on: new messages use both thresholds.
    ingest(engine, "r", messages(6, tokens=25, start=28))
    newest = memories_of(engine, "r")[-1]
    assert (newest["mode"], newest["trigger"], newest["message_count"]) == ("standard", "messages", 5)


def test_chunk_events_of_a_superseded_generation_are_ignored_by_the_files(engine):
    from engram.events.discussion import ChunkSummarized
    from engram.events.provenance import LlmCall

    ingest(engine, "late", messages(10))
    _regenerate(engine, "late", 1)
    stale = ChunkSummarized(generation=0, memory_id="g0-m90-91", first_seq=90, last_seq=91, message_ids=("x", "y"),
                            token_count=2, first_ts_us=0, last_ts_us=0, summary="stale", mode="standard",
                            trigger="messages", llm=LlmCall(provider="offline", model="m", task="t", prompt_hash="h"))
    engine.append([Write("late", AGENT, (NewEvent(stale, T0),))])
    engine.settle()
    assert all(m["summary"] != "stale" for m in memories_of(engine, "late"))


def test_the_rolling_summary_merges_in_batches_and_records_what_it_absorbed(engine):
    memory = LocalMemory(engine, AGENT)
    ingest(engine, "sum", messages(43))  # 8 chunk memories
    memory.request_summary("sum", "chatSummarySummarizer", min_memories_per_summary=3, loop_if_memories_exceed=3)
    updates = [e.event for e in events(engine, "sum", "RollingSummaryUpdated")]
    assert [u.memories_merged for u in updates] == [3, 3]  # 8 waiting: 3, 3, and 2 < 3 wait
    record = read_summary(engine.paths.discussion_file(AGENT, "sum", SUMMARY_SUFFIX))
    mems = memories_of(engine, "sum")
    assert record["memories_absorbed"] == 6 and record["absorbed_through"] == mems[5]["memory_id"]
    assert record["absorbed_through_seq"] == mems[5]["last_seq"] and record["summary"] == updates[-1].summary
    memory.request_summary("sum", "FullChatSummary", min_memories_per_summary=1, loop_if_memories_exceed=3)
    assert read_summary(engine.paths.discussion_file(AGENT, "sum", SUMMARY_SUFFIX))["memories_absorbed"] == 8
    memory.request_summary("sum", "FullChatSummary", min_memories_per_summary=1, loop_if_memories_exceed=3)
    assert len(events(engine, "sum", "RollingSummaryUpdated")) == 3  # nothing new: nothing merged


def test_a_summarizer_without_state_recovers_it_from_the_log_and_appends_nothing_twice(engine):
    from engram.policies.host import PolicyHost
    from engram.policies.summarizer import Summarizer

    ingest(engine, "re", messages(22))
    before = [(r.type, r.event_id) for r in events(engine, "re")]
    fresh = Summarizer(engine.summarizer.ctx)  # a member that never saw this discussion
    fresh.settings = engine.summarizer.settings
    fresh.position = engine.shard.head()
    engine.policies = PolicyHost([fresh], read=engine.shard.read, append=engine.shard.append_many,
                                 head=engine.shard.head, state_dir=None)
    engine.summarizer = fresh
    ingest(engine, "re", messages(5, start=22))
    after = [(r.type, r.event_id) for r in events(engine, "re")]
    assert after[: len(before)] == before
    chunks = [r.event.message_ids for r in events(engine, "re", "ChunkSummarized")]
    # 27 messages, lookback 3: m0-m23 eligible; m15-m19 is the one new chunk, m20-m23 wait.
    assert chunks == [tuple(f"m{i}" for i in range(k, k + 5)) for k in (0, 5, 10, 15)]
    ids = [e for _, e in after if e]
    assert len(ids) == len(set(ids))


def test_the_same_batch_handled_twice_appends_nothing_twice(engine):
    ingest(engine, "twice", messages(20), settle=False)
    batch = engine.shard.read(0, limit=None)
    engine.settle()
    count = len(engine.shard.read(0, limit=None))
    from engram.policies.summarizer import Summarizer

    restarted = Summarizer(engine.summarizer.ctx)  # lost its snapshot: handles the batch again
    restarted.handle(batch)
    assert len(engine.shard.read(0, limit=None)) == count


def test_memory_workflow_writes_the_chunk_memory_and_a_missing_one_falls_back_on_record(engine):
    workflows = engine.home.root / "workflows"
    workflows.mkdir()
    (workflows / "my-file-memory-workflow.json").write_text(json.dumps([
        {"id": "summarize", "type": "Standard", "systemPrompt": "Summarize.", "prompt": "Chunk: [TextChunk]"},
    ]))
    write_settings(engine.home.root, fileMemoryWorkflowName="my-file-memory-workflow",
                   vectorMemoryWorkflowName="no-such-workflow")
    ingest(engine, "wf", messages(9))
    line = memories_of(engine, "wf")[0]
    assert line["workflow"].startswith("my-file-memory-workflow@")
    vec = [e.event for e in events(engine, "wf", "VectorMemoryStored")][0]
    assert vec.workflow is None and "no-such-workflow" in vec.workflow_error and vec.title


def test_discussions_worked_in_parallel_get_the_same_memories_as_one_by_one(engine, tmp_path):
    from tests.memory.discussion.engine import LocalEngine

    engine.summarizer.parallel = 3
    for d in ("p1", "p2", "p3"):
        ingest(engine, d, messages(14, tokens=30), settle=False)
    engine.settle()
    serial_home = tmp_path / "serial"
    serial_home.mkdir()
    with LocalEngine(serial_home) as serial:
        assert serial.summarizer.parallel == 1  # the offline heuristic is CPU-bound: one at a time
        for d in ("p1", "p2", "p3"):
            ingest(serial, d, messages(14, tokens=30), settle=False)
        serial.settle()
        for d in ("p1", "p2", "p3"):
            strip = lambda lines: [(m["memory_id"], m["message_ids"], m["summary"]) for m in lines]
            assert strip(memories_of(engine, d)) == strip(memories_of(serial, d)) and memories_of(engine, d)


def test_a_summarizer_that_lost_its_snapshot_adopts_recorded_decisions_without_calling_the_llm(engine, monkeypatch):
    from engram.policies.summarizer import Summarizer

    ingest(engine, "lost", messages(30))
    LocalMemory(engine, AGENT).request_summary("lost", "chatSummarySummarizer", min_memories_per_summary=1,
                                               loop_if_memories_exceed=3)
    count = len(engine.shard.read(0, limit=None))
    restarted = Summarizer(engine.summarizer.ctx)  # position 0, no state: the whole log again
    restarted._tasks = engine.summarizer.tasks
    inner = getattr(restarted._tasks, "inner", restarted._tasks)  # the memory tasks behind the outage guard
    monkeypatch.setattr(type(inner), "run", lambda *a: pytest.fail("an LLM call was repeated"))
    restarted.handle(engine.shard.read(0, limit=None))
    assert len(engine.shard.read(0, limit=None)) == count
    state = restarted.discussions[(AGENT, "lost")]
    assert state.memories.chunks == 5 and state.summary.absorbed == 5 and state.message_count == 30


def test_the_offline_responders_replies_keep_their_label_in_the_log_but_never_become_memory(engine):
    from engram.providers.llm.offline.respond import NO_MATCH, QUOTING

    said = ["My sister Ines is coming next week.", "She is allergic to penicillin and she is vegetarian.",
            "We booked a table at the harbour restaurant.", "What is my sister allergic to, and what does she eat?",
            "Remind me what we booked.", "Thanks, that helps."]
    replies = [NO_MATCH, f"{QUOTING}\n- User: She is allergic to penicillin and she is vegetarian.", NO_MATCH,
               f"{QUOTING}\n- User: My sister Ines is coming next week.\n- vector memory store: Ines is vegetarian", NO_MATCH,
               NO_MATCH]
    convo = []
    for i, (u, a) in enumerate(zip(said, replies)):
        convo.append(IncomingMessage(role="user", content=u, ts_us=T0 + 2 * i * 60_000_000, message_id=f"u{i}"))
        convo.append(IncomingMessage(role="assistant", content=a, ts_us=T0 + (2 * i + 1) * 60_000_000, message_id=f"a{i}"))
    ingest(engine, "ines", convo)
    LocalMemory(engine, AGENT).request_summary("ines", "FullChatSummary", min_memories_per_summary=1,
                                               loop_if_memories_exceed=3)
    logged = [e.event.content for e in events(engine, "ines", "MessageAppended") if e.event.role == "assistant"]
    assert logged == replies  # the log keeps what was said, label and all
    chunks = memories_of(engine, "ines")
    vectors = [{"title": v.title, "summary": v.summary, "entities": v.entities, "key_phrases": v.key_phrases,
                "topics": v.topics} for v in (r.event for r in events(engine, "ines", "VectorMemoryStored"))]
    summary = read_summary(engine.paths.discussion_file(AGENT, "ines", SUMMARY_SUFFIX))
    assert chunks and vectors and summary  # memories were made, of the user's words
    made = json.dumps([chunks, vectors, summary]).lower()
    assert "penicillin" in made
    for words in ("offline heuristic", "language model", "memory context", "vector memory store", "assistant's sister"):
        assert words not in made, words


def test_a_fact_the_assistant_quotes_back_from_its_memory_stays_the_users_in_discussion_memory(engine):
    from engram.providers.llm.provenance import record_injected

    fact = "My sister Ines is vegetarian and allergic to penicillin."
    quote = "Your sister Ines is vegetarian and allergic to penicillin."
    convo = [IncomingMessage(role="user", content=fact, ts_us=T0, message_id="u0")]
    for i in range(1, 7):
        convo.append(IncomingMessage(role="user", content=f"Plan item {i}: we walk along the harbour at noon.",
                                     ts_us=T0 + 2 * i * 60_000_000, message_id=f"u{i}"))
        said = f"{quote} I booked the harbour walk for day {i}." if i == 1 else f"Noted plan item {i}."
        convo.append(IncomingMessage(role="assistant", content=said, ts_us=T0 + (2 * i + 1) * 60_000_000,
                                     message_id=f"a{i}", metadata=record_injected([f"User: {fact}"]) if i == 1 else {}))
    ingest(engine, "quotes", convo)
    summaries = " ".join(m["summary"] for m in memories_of(engine, "quotes")).lower()
    assert "user's sister ines is vegetarian and allergic to penicillin" in summaries
    assert summaries.count("allergic to penicillin") == 1  # the user's fact, once: never as the assistant's
    assert "your sister" not in summaries and "assistant's sister" not in summaries

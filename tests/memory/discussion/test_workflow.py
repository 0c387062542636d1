"""The workflow engine: the guide's node JSON, clear errors, outputs by id, and the WorkflowLock."""

from __future__ import annotations

import json
import threading

import pytest
from tests.memory.discussion.conftest import AGENT, ingest, messages
from tests.memory.discussion.engine import LocalMemory

from engram.memory.discussion import search as vsearch
from engram.memory.discussion.workflow import ChatMessage, Responder, RunContext, WorkflowError, parse, run
from engram.memory.discussion.workflow.engine import NO_MEMORIES
from engram.providers.llm.factory import make_tasks

# Every node exactly as the WilmerAI memory guide writes it.
GUIDE_NODES = [
    {"id": "create_vector_memories_node", "type": "QualityMemory", "name": "Create/Update Vector Memories"},
    {"id": "update_rolling_summary_node", "type": "chatSummarySummarizer", "name": "Update Rolling Chat Summary",
     "minMemoriesPerSummary": 3, "loopIfMemoriesExceed": 3},
    {"id": "get_recent_memories_node", "type": "RecentMemorySummarizerTool", "name": "Get Recent Memories",
     "maxTurnsToPull": 0, "maxSummaryChunksFromFile": 3, "lookbackStart": 0, "customDelimiter": "--ChunkBreak--"},
    {"id": "update_and_get_recent_memories", "type": "RecentMemory", "name": "Update and Get Recent Memories"},
    {"id": "get_full_summary_fast_node", "type": "GetCurrentSummaryFromFile", "name": "Get Full Chat Summary (Fast)"},
    {"id": "update_and_get_summary_node", "type": "FullChatSummary", "name": "Update and Get Full Chat Summary",
     "isManualConfig": False},
    {"id": "smart_search_node", "type": "VectorMemorySearch", "name": "Search for Specific Details",
     "input": "Project Stardust;mission parameters;Dr. Evelyn Reed", "limit": 5},
]


def test_every_node_of_the_guide_parses_as_written():
    wf = parse(GUIDE_NODES, "guide.json")
    assert [n.kind for n in wf.nodes] == ["QualityMemory", "chatSummarySummarizer", "RecentMemorySummarizerTool",
                                         "RecentMemory", "GetCurrentSummaryFromFile", "FullChatSummary", "VectorMemorySearch"]
    assert wf.nodes[1].min_memories_per_summary == 3 and wf.nodes[6].limit == 5 and wf.nodes[6].search_mode == "hybrid"
    assert wf.nodes[2].custom_delimiter == "--ChunkBreak--"


def test_both_spellings_of_the_summarizer_node_are_accepted_and_wilmer_wrapping_too():
    wf = parse({"nodes": [{"type": "ChatSummarySummarizer"}, {"type": "chatSummarySummarizer"}]}, "w.json")
    assert [n.kind for n in wf.nodes] == ["chatSummarySummarizer", "chatSummarySummarizer"]


def test_an_unknown_key_names_the_key_and_the_closest_valid_one():
    with pytest.raises(WorkflowError, match=r"node 1 \('s'\), VectorMemorySearch: unknown key 'limt'; did you mean 'limit'\?"):
        parse([{"id": "s", "type": "VectorMemorySearch", "input": "a", "limt": 3}], "w.json")


def test_an_unknown_node_type_names_the_closest_valid_one():
    with pytest.raises(WorkflowError, match=r"unknown node type 'VectorMemorySerch'; did you mean 'VectorMemorySearch'\?"):
        parse([{"type": "VectorMemorySerch", "input": "a"}], "w.json")


def test_references_must_name_an_earlier_node():
    with pytest.raises(WorkflowError, match=r"\{later\} in prompt refers to a node that runs later"):
        parse([{"type": "Standard", "prompt": "{later}"}, {"id": "later", "type": "GetCurrentSummaryFromFile"}], "w.json")
    with pytest.raises(WorkflowError, match=r"unknown reference \{serch\} in input; did you mean 'search'\?"):
        parse([{"id": "search", "type": "GetCurrentSummaryFromFile"}, {"type": "VectorMemorySearch", "input": "{serch}"}], "w.json")
    # JSON in a prompt is not a reference.
    parse([{"type": "Standard", "prompt": 'Answer as {"title": "..."}'}], "w.json")


@pytest.fixture
def chat(engine):
    ingest(engine, "chat", messages(20))
    return LocalMemory(engine, AGENT)


def ctx(memory, discussion="chat", **kw):
    return RunContext(discussion=discussion, messages=[ChatMessage("user", "What about Stardust?")], memory=memory,
                      responder=Responder(make_tasks()), **kw)


def test_outputs_are_available_to_later_nodes_by_id_and_by_position(chat):
    wf = parse([
        {"id": "recent", "type": "RecentMemorySummarizerTool", "maxSummaryChunksFromFile": 2, "customDelimiter": " || "},
        {"type": "Standard", "prompt": "By id: {recent} / by position: {agent1Output} / asked: {chat_user_prompt_last_one}",
         "returnToUser": True},
    ], "w.json")
    out = run(wf, ctx(chat))
    lines = [json.loads(x) for x in chat.path("chat", "_memories.jsonl").read_text().splitlines()]
    assert out.outputs["recent"] == " || ".join(m["summary"] for m in lines[-2:])
    assert out.outputs["agent1Output"] == out.outputs["recent"]
    assert out.response_node == "agent2Output" and out.response == out.outputs["agent2Output"]


def test_readers_of_a_discussion_without_memories_say_so(engine):
    ingest(engine, "fresh", messages(2))
    wf = parse([{"type": "RecentMemorySummarizerTool"}, {"type": "VectorMemorySearch", "input": "anything"},
                {"type": "GetCurrentSummaryFromFile"}], "w.json")
    out = run(wf, ctx(LocalMemory(engine, AGENT), "fresh"))
    assert [r.output for r in out.results][:1] == [NO_MEMORIES]
    assert out.results[1].output.startswith("No memories have been stored for discussion 'fresh' yet")


def test_without_a_discussion_id_memory_nodes_work_statelessly():
    wf = parse([{"type": "VectorMemorySearch", "input": "a"},
                {"type": "RecentMemorySummarizerTool", "maxTurnsToPull": 2, "lookbackStart": 1}], "w.json")
    msgs = [ChatMessage("user", "one"), ChatMessage("assistant", "two"), ChatMessage("user", "three")]
    out = run(wf, RunContext(discussion=None, messages=msgs))
    assert out.results[0].output == vsearch.NO_DISCUSSION
    assert out.results[1].output == "User: one--ChunkBreak--Assistant: two"


class GatedMemory(LocalMemory):
    """The real in-process memory, whose creators wait at a gate the test opens."""

    def __init__(self, engine, agent):
        super().__init__(engine, agent)
        self.gate = threading.Event()
        self.creating = threading.Event()

    def ensure_memories(self, discussion):
        self.creating.set()
        assert self.gate.wait(30)
        return super().ensure_memories(discussion)


def test_after_a_workflow_lock_the_caller_gets_the_response_while_memory_work_goes_on(engine):
    ingest(engine, "locked", messages(20), settle=False)
    memory = GatedMemory(engine, AGENT)
    wf = parse([
        {"id": "fast", "type": "RecentMemorySummarizerTool"},
        {"id": "answer", "type": "Standard", "prompt": "Memories: {fast}", "returnToUser": True},
        {"type": "WorkflowLock", "workflowLockId": "memory-generation-lock"},
        {"id": "create", "type": "QualityMemory"},
    ], "w.json")
    out = run(wf, ctx(memory, "locked"))
    assert out.response_node == "answer" and out.response
    assert memory.creating.wait(30) and out.background.is_alive()  # the creator is still working
    # Readers never wait for writers: another workflow reads while the creator is busy.
    reader = run(parse([{"type": "GetCurrentSummaryFromFile"}], "r.json"), ctx(memory, "locked"))
    assert reader.results[0].output
    memory.gate.set()
    assert out.wait(60)
    create = [r for r in out.results if r.id == "create"][0]
    assert create.background and "new chunk memories" in create.info
    assert len(memory.counts("locked")) and memory.counts("locked")["memories"] == 3


def test_chat_summary_summarizer_node_merges_and_returns_the_summary(chat):
    wf = parse([{"id": "s", "type": "ChatSummarySummarizer", "minMemoriesPerSummary": 1, "loopIfMemoriesExceed": 2}], "w.json")
    out = run(wf, ctx(chat))
    summary = json.loads(chat.path("chat", "_summary.jsonl").read_text())
    assert out.outputs["s"] == summary["summary"] and summary["memories_absorbed"] == 3
    assert "rolling summary now covers 3 chunk memories" in out.results[0].info


def test_full_chat_summary_manual_config_is_a_pure_read(chat):
    wf = parse([{"type": "FullChatSummary", "isManualConfig": True}], "w.json")
    out = run(wf, ctx(chat))
    assert out.results[0].info == "" and not chat.path("chat", "_summary.jsonl").exists()


def test_offline_standard_node_quotes_the_memories_its_prompt_refers_to_under_a_label(chat):
    wf = parse([
        {"id": "recent", "type": "RecentMemorySummarizerTool"},
        {"id": "answer", "type": "Standard", "prompt": "Memories: {recent}\nQuestion: {chat_user_prompt_last_one}"},
    ], "w.json")
    out = run(wf, RunContext(discussion="chat", messages=[ChatMessage("user", "What was message number 12 about?")],
                             memory=chat, responder=Responder(make_tasks())))
    answer = out.results[1]
    assert answer.output.splitlines()[:2] == [
        "[offline heuristic, not a language model] The memories most relevant to the last message:",
        "- User: Message number 12.",
    ]
    assert (answer.llm.task, answer.llm.model, answer.info) == ("respond", "offline-heuristic-v1", "offline/offline-heuristic-v1")


def test_a_streamed_run_passes_on_the_text_of_the_response_node_only():
    """`RunContext.stream_to` follows the answer the user gets: not a helper Standard node's, nor a node's after the
    WorkflowLock (the offline responder's answer arrives whole)."""
    wf = parse([
        {"id": "draft", "type": "Standard", "prompt": "Draft an answer to {chat_user_prompt_last_one}"},
        {"id": "answer", "type": "Standard", "prompt": "Improve: {draft}", "returnToUser": True},
        {"type": "WorkflowLock", "workflowLockId": "w"},
        {"id": "later", "type": "Standard", "prompt": "Something else", "returnToUser": True},
    ], "w.json")
    streamed: list[str] = []
    out = run(wf, RunContext(discussion=None, messages=[ChatMessage("user", "What about Stardust?")],
                             responder=Responder(make_tasks()), stream_to=streamed.append))
    assert out.wait(30)
    assert out.response_node == "answer" and streamed == [out.response]
    assert out.outputs["draft"] and out.outputs["later"]  # both ran; neither was streamed


class MeetingMemory(LocalMemory):
    """The real in-process memory, with an agent recall; the search's query embedding waits until the recall has
    begun, so the two meet only if they run at the same time."""

    def __init__(self, engine, agent):
        super().__init__(engine, agent)
        self.recalling = threading.Event()
        self.threads: dict[str, str] = {}

    def recall(self, discussion, query, limit):
        self.threads["recall"] = threading.current_thread().name
        self.recalling.set()
        return ["Stardust launches from Kourou"]

    def embed(self, texts):
        self.threads["search"] = threading.current_thread().name
        assert self.recalling.wait(10), "the search ran alone: the recall had not begun"
        return super().embed(texts)


def test_with_readers_side_by_side_a_search_and_a_recall_run_at_once_and_are_recorded_in_node_order(engine):
    ingest(engine, "chat", messages(20))
    memory = MeetingMemory(engine, AGENT)
    wf = parse([
        {"id": "search", "type": "VectorMemorySearch", "input": "{chat_user_prompt_last_one}"},
        {"id": "recall", "type": "MemoryRecall", "input": "{chat_user_prompt_last_one}"},
        {"id": "summary", "type": "GetCurrentSummaryFromFile"},
        {"id": "answer", "type": "Standard", "prompt": "{search} {recall} {summary}", "returnToUser": True},
    ], "w.json")
    out = run(wf, ctx(memory, readers_side_by_side=True))
    assert [r.id for r in out.results] == ["search", "recall", "summary", "answer"]
    assert out.outputs["recall"] == "- Stardust launches from Kourou" and "result(s)" in out.results[0].info
    assert memory.threads["search"] != memory.threads["recall"]


def test_a_reader_whose_input_uses_an_earlier_readers_output_waits_for_it(engine):
    ingest(engine, "chat", messages(20))
    memory = MeetingMemory(engine, AGENT)
    memory.recalling.set()  # (the search does not wait here)
    wf = parse([
        {"id": "search", "type": "VectorMemorySearch", "input": "{chat_user_prompt_last_one}"},
        {"id": "recall", "type": "MemoryRecall", "input": "{search}"},
    ], "w.json")
    seen = []
    memory.recall = lambda discussion, query, limit: seen.append(query) or ["found"]
    out = run(wf, ctx(memory, readers_side_by_side=True))
    assert seen == [out.outputs["search"].strip()] and out.outputs["recall"] == "- found"

"""Running a workflow: nodes in order, each node's output available to later nodes.

Readers (RecentMemorySummarizerTool, GetCurrentSummaryFromFile, VectorMemorySearch, and
FullChatSummary with `isManualConfig`) read the projection files as they are: they never wait
for memory creation. Creators (QualityMemory, RecentMemory, FullChatSummary,
chatSummarySummarizer) hand their work to the discussion's Summarizer and wait for it: the
Summarizer is serial per discussion, so two memory jobs for one discussion never run at once,
and there is no lock to expire. After a `WorkflowLock` node the rest of the workflow runs in a
background thread and `run` returns at once with the response.

The response is the output of the node marked `returnToUser`, else of the last node before the
lock (or of the last node) that produced any output.

With `RunContext.readers_side_by_side` (the memory proxy), consecutive memory readers (search, recall,
summary and memories from file) none of whose inputs refer to another's output run at once: the recall
works in its reader's process while the search embeds here. Their results are recorded in node order,
as if they had run one after the other.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from engram.config import defaults as d
from engram.config.home import ProjectionPaths
from engram.events.provenance import LlmCall
from engram.memory.discussion import search as vsearch
from engram.memory.discussion.files import MEMORIES_SUFFIX, SUMMARY_SUFFIX, read_memories, read_summary
from engram.memory.discussion.vectors import VectorStore
from engram.memory.discussion.workflow import nodes as n
from engram.memory.discussion.workflow.nodes import TEMPLATE_FIELDS
from engram.memory.discussion.workflow.parse import CHAT_COUNTS, REFERENCE, Workflow, node_id, output_names
from engram.memory.discussion.workflow.responder import ChatMessage, Responder, Responds

NO_MEMORIES = "No memories have been generated yet"
NO_SUMMARY = "No chat summary has been generated yet"
NO_RECALL = "Nothing recalled"


class MemoryAccess(Protocol):
    """What memory nodes need from engram (implemented over the Ray runtime, or in process)."""

    agent: str
    paths: ProjectionPaths

    def ensure_memories(self, discussion: str) -> str:
        """Wait until the Summarizer has handled every message so far and the files show it;
        returns a line saying what changed."""
        ...

    def request_summary(self, discussion: str, node: str, *, min_memories_per_summary: int,
                        loop_if_memories_exceed: int, system_prompt: str | None = None,
                        prompt: str | None = None, max_response_size_in_tokens: int | None = None,
                        endpoint_name: str | None = None, preset: str | None = None) -> str:
        """Ask the Summarizer to merge new chunk memories into the rolling summary, and wait."""
        ...

    def open_store(self, discussion: str) -> VectorStore | None: ...

    def embed(self, texts: list[str]) -> np.ndarray:
        ...

    @property
    def embedding_model(self) -> str | None: ...

    # Optional: a MemoryRecall node needs it. The agent's recalled memories for `query`, best first.
    # def recall(self, discussion: str | None, query: str, limit: int) -> list[str]: ...


class NodeFailed(RuntimeError):
    pass


@dataclass
class NodeResult:
    index: int
    id: str
    kind: str
    output: str
    info: str = ""
    seconds: float = 0.0
    background: bool = False
    llm: LlmCall | None = None  # the LlmCall of a Standard node


@dataclass
class RunContext:
    discussion: str | None
    messages: Sequence[ChatMessage] = ()
    memory: MemoryAccess | None = None
    responder: Responds | None = None
    inputs: Sequence[str] = ()  # {agent<N>Input}
    bracket_inputs: dict[str, str] = field(default_factory=dict)  # [TextChunk] … in memory workflows
    # The route of Standard nodes that name no endpointName/preset (a memory workflow runs with the
    # settings' ones); None: the respond task's configured route.
    endpoint_name: str | None = None
    preset: str | None = None
    system_prompt: str = ""  # {chat_system_prompt}: what the front-end sent as its system prompt
    # Receives the text of the `returnToUser` Standard node's answer as the model produces it (a streamed reply).
    stream_to: Callable[[str], None] | None = None
    # The front end's own samplers (temperature, top_p, max_tokens, stop…) for that same node's call: they win over
    # its preset's unless the preset says `frontEndSamplers: "override"`. Memory-creating nodes never get them.
    sampling: Any = None
    # Run consecutive independent memory readers at once (see the module docstring).
    readers_side_by_side: bool = False


@dataclass
class WorkflowRun:
    workflow: Workflow
    results: list[NodeResult] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)
    response: str = ""
    response_node: str | None = None
    response_seconds: float = 0.0
    background: threading.Thread | None = None
    background_error: BaseException | None = None
    rest: Callable[[], None] | None = None  # with run(defer=True): the nodes after the lock, as a function to call

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the nodes after the WorkflowLock; True when they are done (raises their error)."""
        if self.background is not None:
            self.background.join(timeout)
            if self.background.is_alive():
                return False
        if self.background_error is not None:
            raise self.background_error
        return True


def run(workflow: Workflow, ctx: RunContext, *, defer: bool = False) -> WorkflowRun:
    """Run `workflow`; the nodes after a WorkflowLock start in a background thread, or, with `defer`, are left
    in `WorkflowRun.rest` for the caller to run when it chooses (e.g. coalesced per discussion)."""
    started = time.perf_counter()
    out = WorkflowRun(workflow)
    nodes = list(workflow.nodes)
    lock = next((i for i, node in enumerate(nodes) if isinstance(node, n.WorkflowLock)), None)
    front = nodes if lock is None else nodes[: lock + 1]
    i = 0
    while i < len(front):
        end = _readers_from(front, i) if ctx.readers_side_by_side else i + 1
        if end - i > 1:
            _run_side_by_side(out, ctx, range(i, end), front)
        else:
            _run_node(out, ctx, i, front[i], background=False)
        i = max(end, i + 1)
    _choose_response(out, front)
    out.response_seconds = time.perf_counter() - started
    if lock is not None and lock + 1 < len(nodes):
        def rest() -> None:
            try:
                for i in range(lock + 1, len(nodes)):
                    _run_node(out, ctx, i, nodes[i], background=True)
            except BaseException as exc:  # reported by wait()
                out.background_error = exc

        if defer:
            out.rest = rest
        else:
            out.background = threading.Thread(target=rest, name="workflow-after-lock", daemon=True)
            out.background.start()
    return out


def _choose_response(out: WorkflowRun, front: list[n.Node]) -> None:
    marked = [r for r, node in zip(out.results, front) if isinstance(node, n.Standard) and node.return_to_user]
    candidates = marked or [r for r in reversed(out.results) if r.output]
    if candidates:
        out.response, out.response_node = candidates[0].output, candidates[0].id


def _is_response(out: WorkflowRun, index: int) -> bool:
    """Whether node `index` is the one whose answer is the response (`_choose_response`: the first Standard node
    marked returnToUser before the WorkflowLock): the one a streamed reply follows."""
    for i, node in enumerate(out.workflow.nodes):
        if isinstance(node, n.WorkflowLock):
            return False
        if isinstance(node, n.Standard) and node.return_to_user:
            return i == index
    return False


def _run_node(out: WorkflowRun, ctx: RunContext, index: int, node: n.Node, *, background: bool) -> None:
    _record(out, index, node, _timed(out, ctx, index, node), background)


# What a node did: its output and what to show about it, with the LlmCall of a Standard node.
Executed = tuple[str, str] | tuple[str, str, LlmCall]
# ... and how long it took: (output, info, seconds, LlmCall or None).
Timed = tuple[str, str, float, LlmCall | None]


def _timed(out: WorkflowRun, ctx: RunContext, index: int, node: n.Node) -> Timed:
    started = time.perf_counter()
    executed = _execute(out, ctx, index, node)
    return executed[0], executed[1], time.perf_counter() - started, executed[2] if len(executed) == 3 else None


def _record(out: WorkflowRun, index: int, node: n.Node, done: Timed, background: bool) -> None:
    output, info, seconds, llm = done
    out.results.append(NodeResult(index, node_id(node, index), node.kind, output, info, seconds, background, llm))
    for name in output_names(node, index):
        out.outputs[name] = output


# Memory readers that may run side by side: none waits for memory creation or calls a model.
SIDE_BY_SIDE = (n.VectorMemorySearch, n.MemoryRecall, n.GetCurrentSummaryFromFile, n.RecentMemorySummarizerTool)
_side_pool: ThreadPoolExecutor | None = None
_side_pool_lock = threading.Lock()


def _references(node: n.Node) -> set[str]:
    return {name for f in TEMPLATE_FIELDS if isinstance(text := getattr(node, f, None), str)
            for name in REFERENCE.findall(text)}


def _readers_from(front: Sequence[n.Node], start: int) -> int:
    """The end (exclusive) of the run of memory readers from `start` that refer to none of each other's outputs."""
    names: set[str] = set()
    end = start
    while end < len(front):
        node = front[end]
        if not (isinstance(node, SIDE_BY_SIDE) and node.reads_only) or _references(node) & names:
            break
        names |= set(output_names(node, end))
        end += 1
    return end


def _run_side_by_side(out: WorkflowRun, ctx: RunContext, indexes: range, front: Sequence[n.Node]) -> None:
    """Run the readers `indexes` at once (the first on this thread, the others on kept threads: no thread start
    per request); record them in node order. The first error, in node order, is raised after all have ended."""
    global _side_pool
    with _side_pool_lock:
        if _side_pool is None:
            _side_pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="workflow-reader")
        pool = _side_pool
    first, *rest = indexes
    futures = [pool.submit(_timed, out, ctx, i, front[i]) for i in rest]
    done: list[Timed | BaseException] = []
    try:
        done.append(_timed(out, ctx, first, front[first]))
    except BaseException as exc:  # noqa: BLE001 - raised in node order below
        done.append(exc)
    for f in futures:
        try:
            done.append(f.result())
        except BaseException as exc:  # noqa: BLE001
            done.append(exc)
    for i, result in zip(indexes, done):
        if isinstance(result, BaseException):
            raise result
        _record(out, i, front[i], result, background=False)


def referenced(texts: Sequence[str], out: WorkflowRun, ctx: RunContext) -> list[str]:
    """The memory context `texts` pull in: outputs of earlier nodes and the workflow's inputs they
    refer to, in order of reference (chat variables are the question, not context)."""
    found: list[str] = []
    for text in texts:
        for name in REFERENCE.findall(text):
            if name in out.outputs:
                found.append(out.outputs[name])
            elif name.startswith("agent") and name.endswith("Input") and name[5:-5].isdigit():
                k = int(name[5:-5])
                if 1 <= k <= len(ctx.inputs):
                    found.append(ctx.inputs[k - 1])
        found += [value for key, value in ctx.bracket_inputs.items() if f"[{key}]" in text]
    return [v for v in dict.fromkeys(found) if v.strip()]


def render(text: str, out: WorkflowRun, ctx: RunContext) -> str:
    """`text` with every known `{name}` replaced (unknown braces are left as they are)."""
    values = dict(out.outputs)
    values["discussion_id"] = ctx.discussion or ""
    values["chat_system_prompt"] = ctx.system_prompt
    user = [m.content for m in ctx.messages if m.role == "user"]
    for word, count in CHAT_COUNTS.items():
        values[f"chat_user_prompt_last_{word}"] = "\n".join(user[-count:])
    for i, value in enumerate(ctx.inputs, start=1):
        values[f"agent{i}Input"] = value
    text = REFERENCE.sub(lambda m: values.get(m.group(1), m.group(0)), text)
    for name, value in ctx.bracket_inputs.items():
        text = text.replace(f"[{name}]", value)
    return text


def _need(ctx: RunContext, node: n.Node) -> MemoryAccess:
    if ctx.memory is None:
        raise NodeFailed(f"{node.kind} node {node.label()!r} needs engram's memory runtime, which this run does not have")
    return ctx.memory


def _execute(out: WorkflowRun, ctx: RunContext, index: int, node: n.Node) -> Executed:
    d_id = ctx.discussion
    if isinstance(node, n.WorkflowLock):
        return "", "the rest of the workflow runs in the background"
    if isinstance(node, n.Standard):
        if ctx.responder is None:
            raise NodeFailed(f"Standard node {node.label()!r}: no LLM is configured for this run")
        try:
            reply = ctx.responder.respond(
                system_prompt=render(node.system_prompt, out, ctx), prompt=render(node.prompt, out, ctx),
                conversation=ctx.messages, max_tokens=node.max_response_size_in_tokens,
                context=referenced((node.system_prompt, node.prompt), out, ctx),
                endpoint_name=node.endpoint_name or ctx.endpoint_name, preset=node.preset or ctx.preset,
                on_text=ctx.stream_to if _is_response(out, index) else None,
                sampling=ctx.sampling if _is_response(out, index) else None,
            )
        except ValueError as exc:  # nothing to answer, or a route that is not configured
            raise NodeFailed(f"Standard node {node.label()!r}: {exc}") from None
        llm = reply.llm
        info = f"{llm.provider}/{llm.model}" + (f" via endpoint {llm.endpoint!r}" if llm.endpoint else "")
        info += f" (error: {llm.error})" if llm.error else ""
        return reply.text, info, llm
    if isinstance(node, n.VectorMemorySearch):
        if d_id is None:
            return vsearch.NO_DISCUSSION, "no discussion id"
        memory = _need(ctx, node)
        result = vsearch.search(
            memory.open_store(d_id), render(node.input, out, ctx), discussion=d_id, limit=node.limit,
            mode=node.search_mode, embed=memory.embed, embedding_model=memory.embedding_model,
        )
        info = f"{len(result.hits)} result(s), {result.mode}" + "".join(f"; warning: {w}" for w in result.warnings)
        if result.reason:
            info += "; no match" if result.reason == vsearch.NO_MATCH else "; no memories yet"
        return result.output(), info
    if isinstance(node, n.MemoryRecall):
        memory = _need(ctx, node)
        if not hasattr(memory, "recall"):
            raise NodeFailed(f"MemoryRecall node {node.label()!r} needs the agent's cognitive memory, which this run "
                             "does not have")
        query = render(node.input, out, ctx).strip()
        if not query:
            return NO_RECALL, "nothing to recall for: the input is empty"
        found = memory.recall(d_id, query, node.limit)
        return ("\n".join(f"- {text}" for text in found) if found else NO_RECALL), f"{len(found)} memory trace(s)"
    if isinstance(node, (n.RecentMemorySummarizerTool, n.RecentMemory)):
        info = ""
        if d_id is None:
            return _recent_turns(ctx.messages, node), "no discussion id: recent messages instead of memories"
        memory = _need(ctx, node)
        if isinstance(node, n.RecentMemory):
            info = memory.ensure_memories(d_id)
        return _recent_memories(memory, d_id, node), info
    if isinstance(node, n.GetCurrentSummaryFromFile):
        if d_id is None:
            return NO_SUMMARY, "no discussion id"
        return _summary(_need(ctx, node), d_id), ""
    if isinstance(node, n.FullChatSummary):
        if d_id is None:
            return NO_SUMMARY, "no discussion id"
        memory = _need(ctx, node)
        info = ""
        if not node.is_manual_config:
            info = memory.request_summary(
                d_id, node.kind, min_memories_per_summary=1, loop_if_memories_exceed=d.LOOP_IF_MEMORIES_EXCEED
            )
        return _summary(memory, d_id), info
    if isinstance(node, n.ChatSummarySummarizer):
        if d_id is None:
            return NO_SUMMARY, "no discussion id"
        memory = _need(ctx, node)
        info = memory.request_summary(
            d_id, node.kind, min_memories_per_summary=node.min_memories_per_summary,
            loop_if_memories_exceed=node.loop_if_memories_exceed, system_prompt=node.system_prompt,
            prompt=node.prompt, max_response_size_in_tokens=node.max_response_size_in_tokens,
            endpoint_name=node.endpoint_name, preset=node.preset,
        )
        return _summary(memory, d_id), info
    if isinstance(node, n.QualityMemory):
        if d_id is None:
            return "", "no discussion id: nothing is remembered"
        return "", _need(ctx, node).ensure_memories(d_id)
    raise NodeFailed(f"node type {node.kind} cannot run here")


def _recent_memories(memory: MemoryAccess, discussion: str, node: n.RecentMemorySummarizerTool) -> str:
    lines = read_memories(memory.paths.discussion_file(memory.agent, discussion, MEMORIES_SUFFIX)) or []
    if not lines:
        return NO_MEMORIES
    summaries = [line["summary"] for line in lines]
    wanted = node.max_summary_chunks_from_file or d.MAX_SUMMARY_CHUNKS_FROM_FILE  # WilmerAI: 0 means 3
    if wanted != -1:
        summaries = summaries[-wanted:]
    return node.custom_delimiter.join(summaries)


def _recent_turns(messages: Sequence[ChatMessage], node: n.RecentMemorySummarizerTool) -> str:
    turns = list(messages)
    if node.lookback_start:
        turns = turns[: -node.lookback_start]
    if node.max_turns_to_pull:
        turns = turns[-node.max_turns_to_pull:]
    return node.custom_delimiter.join(f"{m.name or m.role.capitalize()}: {m.content}" for m in turns)


def _summary(memory: MemoryAccess, discussion: str) -> str:
    record = read_summary(memory.paths.discussion_file(memory.agent, discussion, SUMMARY_SUFFIX))
    return record["summary"] if record else NO_SUMMARY

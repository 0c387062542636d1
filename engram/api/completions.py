"""The memory behind the OpenAI-compatible proxy: one chat completion, WilmerAI's rules.

- A `[DiscussionId]…[/DiscussionId]` tag in any message switches memory on for that discussion; it is
  stripped before any model sees it. Without a tag the request is answered without memory and nothing
  is appended.
- The front-end resends the whole history every turn: only messages the log does not hold yet are
  appended (`engram.memory.ingest.history`: aligned with the log's tail, so never twice, also when the history is
  cut). An earlier message it changed is recorded as `MessageEdited`, one it dropped as `MessageRemoved`
  (`history.changes`), before the turn: memory made from the old words is superseded. System messages are the front-end's instructions, not conversation:
  they reach the model ({chat_system_prompt}) and are not appended.
- The configured memory workflow (`proxy.workflow`; the shipped `openai-proxy.workflow.json` by default)
  injects the discussion's summary, recent memories, search results and the agent's recall into the
  system prompt (its readers run side by side: the recall in its reader's process while the search embeds
  here); its `Standard` node's answer (the configured LLM, or the labelled offline responder) is
  the reply, and is appended too. The nodes after its `WorkflowLock` (memory creation) run after the
  response, in the background, never in its path.
- An LLM outage is a 502/503 with its cause; the user's message is in the log already.
- Streaming (`complete(..., on_text=…)`): the reply's text goes to `on_text` as the model produces it (the
  anthropic provider streams it from the Messages API; the offline heuristic's answer comes whole). The full
  reply is appended once it is complete. If the receiver raises `ReplyAbandoned` (the client went away
  mid-stream), the model's call stops and the reply is NOT appended: the log holds what the conversation
  holds, and a front-end that kept the cut reply resends it with its next turn, when it is appended as any
  new message. The user's message stays in the log either way, as it does after a model error mid-stream.
- The front end's samplers (`CompletionRequest.sampling`: temperature, top_p, top_k, max_tokens, stop, seed) go to
  the reply's model call (the `returnToUser` node's, or the call without memory), winning over its preset's unless
  the preset says `"frontEndSamplers": "override"`; memory-creating calls never get them.
- Without a tag the request is forwarded unchanged: the front end's system and conversation messages and its
  samplers go to the configured `respond` route as they came; a text prompt (`text_prompt`: /v1/completions,
  /api/generate) goes to the model untouched (a text-completion endpoint gets it as it is, not templated).
- A text prompt with a tag is the discussion's next user turn: appended after what the log holds (it is not
  aligned with the log's tail as a resent history is), answered by the workflow like any chat turn.
- Several server replicas over one log: a replica's incremental view of a discussion is checked against the
  log on use (the last message it knows must still be at its position, see `_logged_keys`), so a forget
  through another replica makes it read the discussion again.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from engram.api.core import ApiCore
from engram.api import types as t
from engram.api.clock import now_us
from engram.api.errors import error, llm_failure
from engram.kernel.ids import find_discussion_id, strip_discussion_tags, validate_agent

if TYPE_CHECKING:
    from engram.api.discussion_memory import RuntimeMemory
    from engram.api.messages import LatestChange
    from engram.events.envelope import Appended, Recorded
    from engram.events.messages import MessageAppended
    from engram.memory.discussion.workflow import Workflow, WorkflowRun
    from engram.memory.discussion.workflow.nodes import Standard
    from engram.memory.discussion.workflow.responder import Response, Responds
    from engram.providers.endpoints.wire import Asks, Sampling
    from engram.providers.llm.types import Result

log = logging.getLogger("engram.proxy")

# A turn of the conversation: (role, text, name).
Turn = tuple[str, str, str | None]
# A turn the proxy appends: (turn, message id, metadata).
Incoming = tuple[Turn, str, dict[str, Any]]
# A message of the log as the proxy compares it with a resent history: (key, role, message id).
Logged = tuple[str, str, str]
T = TypeVar("T")

SHIPPED_WORKFLOW = "openai-proxy.workflow.json"
SOURCE = "openai proxy"


def response_path_reads_only(workflow: Workflow) -> bool:
    """Whether every node before the workflow's WorkflowLock (all of them, without one) only reads memory."""
    from engram.memory.discussion.workflow.nodes import WorkflowLock

    nodes = list(workflow.nodes)
    lock = next((i for i, node in enumerate(nodes) if isinstance(node, WorkflowLock)), len(nodes))
    return all(node.reads_only for node in nodes[:lock])


def retried_prompt(logged: list[str], keys: list[str]) -> int | None:
    """A text door's prompt (`keys`: its one user message) read back as a transcript: the log's history plus the
    prompt. The chat door's rule for a history that ends with a message the log already ends with (a client's
    retry, a regenerate) applies: nothing is new. So when the log's last message is this prompt (its reply failed),
    or the one before its last (the reply), the prompt is not appended again; the reply is chained on the history up
    to it, as the first answer was (the same reply is then the same message, stored once). Returns the length of
    that history's last index (the prompt's), or None when the prompt is new."""
    if len(keys) != 1:
        return None
    if logged and logged[-1] == keys[0]:
        return len(logged) - 1
    if len(logged) >= 2 and logged[-2] == keys[0]:
        return len(logged) - 2
    return None


def reply_node(workflow: Workflow) -> Standard | None:
    """The workflow's node whose answer is the reply: the first Standard node marked returnToUser before its
    WorkflowLock, else the last Standard node before it (None: no Standard node answers)."""
    from engram.memory.discussion.workflow.nodes import Standard, WorkflowLock

    standard: list[Standard] = []
    for node in workflow.nodes:
        if isinstance(node, WorkflowLock):
            break
        if isinstance(node, Standard):
            if node.return_to_user:
                return node
            standard.append(node)
    return standard[-1] if standard else None


def fresh_seqs(result: Appended) -> list[int | None]:
    """Per event of an Appended, its seq when this append made it, None when the log held it already: a duplicate
    keeps its original seq, older than every seq the append gave (the `duplicates` smallest are the old ones)."""
    seqs: list[int | None] = list(result.seqs)
    if not result.duplicates:
        return seqs
    old = set(sorted(result.seqs)[: result.duplicates])
    return [None if s in old else s for s in seqs]


def _fingerprint(rec: Recorded) -> tuple[str, str]:
    """What a message event of the log is, to check that the log still holds it at its seq (a purge frees seqs)."""
    from engram.events.messages import MessageAppended
    from engram.memory.ingest.history import message_key

    e = rec.event
    if isinstance(e, MessageAppended):
        return rec.type, message_key(e.role, e.content)
    return rec.type, f"{getattr(e, 'message_id', '')}\x1f{getattr(e, 'content', '')}"


def shipped_workflow_path() -> Path:
    return Path(str(resources.files("engram.samples").joinpath(SHIPPED_WORKFLOW)))


class Timing:
    """Where a completion's time goes, as it goes: engram's own work versus the model's calls. A streamed response
    sends its headers with the reply's first text, before the completion ends: `at_now()` splits the time so far
    (the memory work that preceded the first byte, and the model's part), `CompletionResponse` the whole."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._llm_s = 0.0  # model calls that have returned
        self._call_started: float | None = None  # the model call in progress
        self._lock = threading.Lock()

    def model_call(self, call: Callable[[], T]) -> T:
        """Run `call()` (a model call), counted as the model's time."""
        with self._lock:
            self._call_started = started = time.perf_counter()
        try:
            return call()
        finally:
            with self._lock:
                self._llm_s += time.perf_counter() - started
                self._call_started = None

    def at_now(self) -> tuple[float, float]:
        """(engram's work, the model's) in ms, from the start until now (a call in progress counts to the model)."""
        now = time.perf_counter()
        with self._lock:
            llm = self._llm_s + (now - self._call_started if self._call_started is not None else 0.0)
        total = now - self.started
        llm = min(llm, total)
        return round((total - llm) * 1000, 2), round(llm * 1000, 2)


class _TimedResponder:
    """A workflow's responder (`Responds`) whose calls count as the model's time in a `Timing`."""

    def __init__(self, responder: Responds, timing: Timing) -> None:
        self._responder, self._timing = responder, timing

    def respond(self, **kwargs: Any) -> Response:
        return self._timing.model_call(lambda: self._responder.respond(**kwargs))


# Discussions whose memories are created at once after their responses (the others' runs wait for a worker).
MEMORY_WORKERS = 8


class MemoryWorkers:
    """Daemon worker threads, started as work comes and kept for the next: a response hands its memory creation
    to one without waiting for a thread to start. (The server's own executor would make its shutdown wait for
    memory creation; `wait_proxy_memory` does that, with a timeout.)"""

    def __init__(self, size: int) -> None:
        self.size = size
        self._queue: queue.SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        with self._lock:
            self._queue.put((fn, args))
            if self._queue.qsize() > self._idle and len(self._threads) < self.size:  # no idle thread for it
                th = threading.Thread(target=self._work, name=f"proxy-memory-{len(self._threads)}", daemon=True)
                self._threads.append(th)
                th.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            fn, args = self._queue.get()
            with self._lock:
                self._idle -= 1
            try:
                fn(*args)
            except Exception:
                log.exception("the proxy's memory work failed")


def asks_of(req: t.CompletionRequest) -> Asks | None:
    """The front end's format, keep_alive, options and images as the LLM layer takes them (None: it asked none)."""
    from engram.providers.endpoints.wire import ANY_JSON, Asks, Structured

    images = tuple(image for m in req.messages for image in m.images)
    if req.format is None and req.keep_alive is None and not req.options and not images:
        return None
    if req.format is None:
        structured = None
    elif req.format == ANY_JSON:
        structured = Structured(ANY_JSON, {"type": "object"})
    elif isinstance(req.format, dict):
        structured = Structured("reply", req.format)
    else:
        raise error("invalid_request", f'"format": {req.format!r:.40} is neither "json" nor a JSON schema')
    num_ctx = req.options.get("num_ctx")
    if num_ctx is not None and (isinstance(num_ctx, bool) or not isinstance(num_ctx, int) or num_ctx < 1):
        raise error("invalid_request", 'option "num_ctx" must be a positive integer')
    return Asks(format=structured, keep_alive=req.keep_alive, num_ctx=num_ctx, images=images,
                options=tuple((k, v) for k, v in req.options.items() if k != "num_ctx"))


def sampling_of(req: t.CompletionRequest) -> Sampling | None:
    """The front end's samplers (and its other asks) as the LLM layer takes them (None: the request set none)."""
    from engram.providers.endpoints.wire import Sampling

    s, asks = req.sampling, asks_of(req)
    if s is None:
        return Sampling(asks=asks) if asks is not None else None
    return Sampling(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, max_tokens=s.max_tokens,
                    stop=tuple(s.stop), seed=s.seed, asks=asks)


class ReplyAbandoned(Exception):
    """Raised by a streamed reply's receiver when nobody listens any more: the model's call stops, the reply is
    not appended."""


# What the proxy knows of a discussion's messages in the log (`CompletionOps._logged_keys`): the seq of the last
# message event it has read, the messages (as `Logged`), that last event's fingerprint (`_fingerprint`), and the mark
# at which they are exactly the log's (None: read from the log, check it on use).
History = tuple[int, list[Logged], tuple[str, str] | None, tuple[int, int] | None]


@dataclass(eq=False)
class ProxyState:
    """What the proxy keeps between requests, one per API (`CompletionOps._proxy_state`); changed under the API's
    `_streams_lock`."""

    locks: dict[tuple[str, str], threading.Lock] = field(default_factory=dict)  # (agent, discussion): one turn at a time
    histories: dict[tuple[str, str], History] = field(default_factory=dict)  # (agent, discussion) -> what it knows
    epoch: int = 0  # forgets so far: a tail record taken before a forget is never trusted
    workflow: tuple[tuple[str, int], Workflow] | None = None  # ((path, mtime), the workflow read from it)
    memories: dict[str, RuntimeMemory] = field(default_factory=dict)  # agent -> the workflow's memory access
    # Memory creation after the responses: the latest run left to do per discussion, the discussions whose runs are
    # going on (what `wait_proxy_memory` waits for), and the threads that run them.
    pending: dict[str, tuple[WorkflowRun, RuntimeMemory | None]] = field(default_factory=dict)
    running: set[str] = field(default_factory=set)
    pool: MemoryWorkers | None = None


class CompletionOps(ApiCore):
    if TYPE_CHECKING:  # MessageOps's, beside this one in `Api` (engram.api.service)
        def _message_changes(self, agent: str, discussion: str) -> dict[str, LatestChange]: ...

    # ------------------------------------------------------------------ what the proxy keeps

    def _proxy_state(self) -> ProxyState:
        state: ProxyState | None = self.__dict__.get("_proxy")
        if state is None:
            with self._streams_lock:
                state = self.__dict__.setdefault("_proxy", ProxyState())
        return state

    def _discussion_lock(self, agent: str, discussion: str) -> threading.Lock:
        locks = self._proxy_state().locks
        with self._streams_lock:
            return locks.setdefault((agent, discussion), threading.Lock())

    def forget_histories(self) -> None:
        """Forgetting erases messages and files: the proxy's view of the log and its open stores are read again."""
        state = self._proxy_state()
        with self._streams_lock:
            state.epoch += 1  # a tail record taken before the forget is never trusted
            state.histories.clear()
            state.memories = {}

    def _logged_keys(self, agent: str, discussion: str) -> tuple[list[Logged], tuple[int, int]]:
        """The discussion's messages as its conversation holds them now (edits applied, removed ones left out), oldest
        first, as (key, role, message id), and the mark (appends to the stream through this API, forget epoch) they
        were taken at.

        From the tail record when it is exact: this API made the stream's last append, it knows what that appended,
        and nothing wrote the stream since (no other append through this API, no forget, and no other process can
        append: `Runtime.sole_writer`). Otherwise read from the log (not a projection, which may lag),
        incrementally after the first time; an edit or removal among what is read makes it read the whole
        discussion again (`engram.events.messages.conversation`)."""
        from engram.events.messages import MESSAGE_TYPES, MessageAppended, conversation
        from engram.memory.ingest.history import message_key

        state = self._proxy_state()
        histories = state.histories
        with self._streams_lock:
            mark = (self._stream_writes.get((agent, discussion), 0), state.epoch)  # before the read: see _remember_tail
        after, known, last, exact_at = histories.get((agent, discussion), (0, [], None, None))
        if exact_at == mark and self.rt.sole_writer:
            return known, mark
        # From the last event this view holds (included), so the read also checks that the log still holds it
        # there: a forget through another replica or process purges every message of the discussion, that one too.
        new: list[Recorded] | None = self.rt.read(agent, after=max(0, after - 1), stream=discussion,
                                                  types=list(MESSAGE_TYPES), limit=None)
        if after:
            if new and new[0].seq == after and _fingerprint(new[0]) == last:
                new = new[1:]
            else:
                new = None  # the view is stale: the whole discussion, from the log
        if new is None or any(r.type != "MessageAppended" for r in new):
            new = self.rt.read(agent, after=0, stream=discussion, types=list(MESSAGE_TYPES), limit=None)
            known = []
            messages = conversation(new)
        else:
            messages = new
        if new:
            known = known + [(message_key(e.role, e.content), e.role, e.message_id)
                             for r in messages if isinstance(e := r.event, MessageAppended)]  # all are, by now
            after, last = new[-1].seq, _fingerprint(new[-1])
        histories[(agent, discussion)] = (after, known, last, None)
        return known, mark

    def _remember_tail(self, agent: str, discussion: str, known: list[Logged], mark: tuple[int, int],
                       appended: list[Logged], result: Appended | None) -> None:
        """After the proxy's own append of `appended` ((key, role, id) each; `result`: its Appended), the log's
        messages are `known` + those, exactly, when that append was the only write to the stream since `mark` and
        appended every one of them (no duplicate: a retried request's messages are in the log already, at places this
        API did not see)."""
        if result is None or result.duplicates or len(result.seqs) != len(appended):
            return
        state = self._proxy_state()
        with self._streams_lock:
            now = (self._stream_writes.get((agent, discussion), 0), state.epoch)
            if now != (mark[0] + 1, mark[1]):
                return  # someone else wrote the stream meanwhile (or a forget ran): the next request reads the log
            key, _, _ = appended[-1]
            state.histories[(agent, discussion)] = (max(result.seqs), known + appended, ("MessageAppended", key), now)

    def proxy_workflow(self) -> Workflow:
        """The memory workflow of the proxy: <home>/workflows/<proxy.workflow>.json, else the shipped one
        (parsed once per file version)."""
        from engram.memory.discussion.workflow import WorkflowError, load, workflow_path
        from engram.providers.llm.routing import check_routes

        path = workflow_path(self.home.root, self.config.proxy.workflow)
        if not path.exists():
            path = shipped_workflow_path()
        stamp = (str(path), path.stat().st_mtime_ns)
        state = self._proxy_state()
        cached = state.workflow
        if cached is None or cached[0] != stamp:
            try:
                workflow = load(path)
            except WorkflowError as exc:
                raise error("bad_workflow", f"the proxy's memory workflow: {exc}") from None
            check_routes(self.config.llm, workflow.routes(), workflow.source)
            state.workflow = cached = (stamp, workflow)
        return cached[1]

    # ------------------------------------------------------------------ the operation

    def complete(self, agent: str, req: t.CompletionRequest, on_text: Callable[[str], None] | None = None,
                 timing: Timing | None = None) -> t.CompletionResponse:
        """One chat completion (see the module docstring). `timing`: filled as the completion runs (a streamed
        response reads it when the reply's first text arrives)."""
        timing = timing or Timing()
        started = timing.started
        validate_agent(agent)
        discussion = find_discussion_id([m.content for m in req.messages])
        self._check_asks(req, discussion)
        if discussion is None and req.text_prompt:
            return self._forward_text_prompt(agent, req, started, on_text, timing)
        system = "\n\n".join(x for x in (strip_discussion_tags(m.content) for m in req.messages if m.role == "system") if x)
        turns: list[Turn] = [(m.role, strip_discussion_tags(m.content), m.name) for m in req.messages if m.role != "system"]
        turns = [x for x in turns if x[1]]
        if not turns:
            raise error("malformed_messages", "the messages hold nothing to answer: give at least one user message with "
                        "text (system messages and DiscussionId tags alone are not a conversation)")
        if discussion is None:
            return self._complete_without_memory(agent, system, turns, req, started, on_text, timing)
        self.claim_discussion(agent, discussion)
        workflow = self.proxy_workflow()
        with self._discussion_lock(agent, discussion):
            return self._complete_with_memory(agent, discussion, system, turns, req, workflow, started, on_text, timing)

    def _check_asks(self, req: t.CompletionRequest, discussion: str | None) -> None:
        """Refuse (400, naming the field) what the front end asked that the reply's upstream cannot do: before
        anything is appended or called."""
        from engram.providers.endpoints.adapters import refused_asks
        from engram.providers.llm.routing import reply_endpoint

        asks = asks_of(req)
        if asks is None:
            return
        node = reply_node(self.proxy_workflow()) if discussion is not None else None
        endpoint = reply_endpoint(self.config.llm, getattr(self.tasks(), "provider", ""),
                                  getattr(node, "endpoint_name", None))
        api_type = endpoint.api_type if endpoint is not None else "offline"
        why = refused_asks(api_type, asks, endpoint.structured_output if endpoint is not None else "auto")
        if why:
            raise error("invalid_request", why)

    def _complete_without_memory(self, agent: str, system: str, turns: list[Turn], req: t.CompletionRequest,
                                 started: float, on_text: Callable[[str], None] | None = None,
                                 timing: Timing | None = None) -> t.CompletionResponse:
        from engram.config import defaults as d
        from engram.providers.llm.types import ChatLine

        lines = [ChatLine(role=role, content=text, seq=i + 1, ts_us=0, name=name) for i, (role, text, name) in enumerate(turns)]
        timing = timing or Timing()
        result = timing.model_call(lambda: self.tasks().respond(
            lines, system_prompt=system or None, max_tokens=req.max_tokens or d.MAX_RESPONSE_SIZE_IN_TOKENS,
            on_text=on_text, sampling=sampling_of(req)))
        return self._answered(agent, result, started)

    def _forward_text_prompt(self, agent: str, req: t.CompletionRequest, started: float,
                             on_text: Callable[[str], None] | None = None,
                             timing: Timing | None = None) -> t.CompletionResponse:
        """A text completion without memory: the prompt to the model as the front end wrote it."""
        from engram.config import defaults as d

        system = "\n\n".join(m.content for m in req.messages if m.role == "system" and m.content)
        prompt = "".join(m.content for m in req.messages if m.role != "system")
        if not prompt.strip():
            raise error("malformed_messages", "the prompt is empty: give the text to complete")
        timing = timing or Timing()
        result = timing.model_call(lambda: self.tasks().respond(
            (), system_prompt=system or None, max_tokens=req.max_tokens or d.MAX_RESPONSE_SIZE_IN_TOKENS,
            on_text=on_text, sampling=sampling_of(req), completion_prompt=prompt))
        return self._answered(agent, result, started, strip=False)  # a continuation's leading space is its own

    def _answered(self, agent: str, result: Result[str], started: float, strip: bool = True) -> t.CompletionResponse:
        if result.llm.error:
            raise llm_failure(result.llm.error)
        total = (time.perf_counter() - started) * 1000
        llm_ms = min(result.llm.latency_ms, total)
        return t.CompletionResponse(agent=agent, discussion=None, reply=result.value.strip() if strip else result.value,
                                    responder=f"{result.llm.provider}/{result.llm.model}", appended=0, reply_seq=None,
                                    memory_ms=round(total - llm_ms, 2), llm_ms=round(llm_ms, 2),
                                    input_tokens=result.llm.input_tokens, output_tokens=result.llm.output_tokens)

    def _complete_with_memory(self, agent: str, discussion: str, system: str, turns: list[Turn],
                              req: t.CompletionRequest, workflow: Workflow, started: float,
                              on_text: Callable[[str], None] | None = None,
                              timing: Timing | None = None) -> t.CompletionResponse:
        """The new messages and the reply go to the log in one append after the response is made, when the nodes
        before the WorkflowLock only read (they never look for the new messages in the log): one shard call per
        request. A workflow whose response path creates memories gets the new messages appended first. An LLM
        outage appends the new messages alone: they are in the log whatever the model did."""
        from engram.memory.cognitive.llm_bridge import record_injected
        from engram.memory.discussion.workflow import ChatMessage, Responder, RunContext, run
        from engram.memory.discussion.workflow.engine import NodeFailed
        from engram.memory.ingest.history import chain_ids, changes, message_key

        keys = [message_key(role, text) for role, text, _ in turns]
        logged, mark = self._logged_keys(agent, discussion)
        logged_keys = [k for k, _, _ in logged]
        ts = now_us()
        if req.text_prompt:  # the next turn after the log's messages, unless it is a retry of the last one
            retried = retried_prompt(logged_keys, keys)
            ids = chain_ids(discussion, logged_keys + keys)[len(logged_keys):]
            new = list(range(len(keys))) if retried is None else []
            # the history the reply's id is chained on: a retry's is the first answer's (the log up to the prompt)
            chain = logged_keys + keys if retried is None else logged_keys[:retried + 1]
        else:
            ids = chain_ids(discussion, keys)
            found = changes(logged_keys, keys, [r for _, r, _ in logged], [role for role, _, _ in turns])
            new = found.new
            if found.edited or found.removed:  # the front end changed what the log holds: recorded before the turn
                edited = [(logged[i][2], turns[j]) for i, j in found.edited]
                removed = [logged[i][2] for i in found.removed]
                before = self._message_changes(agent, discussion)
                gone = {mid for mid, latest in before.items() if latest.removed}
                # A swipe back: the message standing in the place of a logged one is one the front end had before,
                # removed since (a regenerate dropped it): that one comes back and the logged one goes.
                back = [(i, j) for i, j in found.edited if ids[j] in gone]
                if back:
                    edited = [e for (i, j), e in zip(found.edited, edited) if (i, j) not in back]
                    removed += [logged[i][2] for i, _ in back]
                    edited += [(ids[j], turns[j]) for _, j in back]
                self._proxy_edits(agent, discussion, edited, removed, ts, before)
                logged, mark = self._logged_keys(agent, discussion)
                logged_keys = [k for k, _, _ in logged]
            chain = keys
        incoming: list[Incoming] = [(turns[i], ids[i], {}) for i in new]
        new_keys = [(keys[i], turns[i][0], ids[i]) for i in new]
        if incoming and not response_path_reads_only(workflow):
            seqs, result = self._proxy_append(agent, discussion, incoming, ts)
            self._remember_tail(agent, discussion, logged, mark, new_keys, result)
            # The reply's append below may set the tail record only when this one was exact too.
            exact = result is not None and not result.duplicates and len(result.seqs) == len(new_keys)
            logged, mark, incoming, new_keys = logged + new_keys, (mark[0] + 1 if exact else -2, mark[1]), [], []
            appended = [s for s in seqs if s is not None]
        else:
            appended = []

        memory = self._proxy_memory(agent)
        ctx = RunContext(discussion=discussion, messages=[ChatMessage(role, text, name) for role, text, name in turns],
                         memory=memory, responder=_TimedResponder(Responder(self.tasks()), timing or Timing()),
                         system_prompt=system, stream_to=on_text, sampling=sampling_of(req), readers_side_by_side=True)
        try:
            outcome = run(workflow, ctx, defer=True)
        except Exception as exc:
            self._proxy_append(agent, discussion, incoming, ts)  # the user's message is recorded all the same
            if isinstance(exc, NodeFailed):
                raise error("bad_workflow", f"the proxy's memory workflow: {exc}") from None
            raise
        answer = next((r for r in outcome.results if r.id == outcome.response_node), None)
        llm = answer.llm if answer is not None else None
        if llm is not None and llm.error:  # an outage: the user's message is in the log, the error says why
            self._proxy_append(agent, discussion, incoming, ts)
            self._after_response(discussion, outcome, memory)
            where = f" (your message is recorded in discussion {discussion!r}; send it again later)"
            raise llm_failure(llm.error, where)
        reply = outcome.response.strip()
        if not reply:
            self._proxy_append(agent, discussion, incoming, ts)
            raise error("bad_workflow", f"the proxy's memory workflow ({workflow.source}) produced no response: mark a "
                        "Standard node returnToUser")
        responder = f"{llm.provider}/{llm.model}" if llm else "workflow"
        reply_key = message_key("assistant", reply)
        reply_id = chain_ids(discussion, chain + [reply_key])[-1]
        # What the workflow's memory nodes gave the reply goes with it (`engram.memory.cognitive.llm_bridge.own_words`).
        injected = [r.output for r in outcome.results if r.id != outcome.response_node and not r.background]
        items = incoming + [(("assistant", reply, None), reply_id, {"responder": responder, **record_injected(injected)})]
        seqs, result = self._proxy_append(agent, discussion, items, max(now_us(), ts + len(incoming)))
        self._remember_tail(agent, discussion, logged, mark, new_keys + [(reply_key, "assistant", reply_id)], result)
        appended += [s for s in seqs[:-1] if s is not None]
        self._after_response(discussion, outcome, memory)
        total = (time.perf_counter() - started) * 1000
        llm_ms = min(answer.seconds * 1000, total) if answer is not None and llm is not None else 0.0
        return t.CompletionResponse(
            agent=agent, discussion=discussion, reply=reply, responder=responder, appended=len(appended),
            reply_seq=seqs[-1], memory_ms=round(total - llm_ms, 2), llm_ms=round(llm_ms, 2),
            input_tokens=llm.input_tokens if llm else 0, output_tokens=llm.output_tokens if llm else 0,
            position=self.position(agent, appended + list(seqs)))

    def _proxy_memory(self, agent: str) -> RuntimeMemory:
        """The workflow's memory access for `agent`, kept between requests (its vector stores stay open, reopened
        only when their file changes)."""
        from engram.api.discussion_memory import RuntimeMemory

        memories = self._proxy_state().memories
        memory = memories.get(agent)
        if memory is None:
            memory = memories[agent] = RuntimeMemory(self.rt, agent, self.query_embedder(),
                                                     recaller=self._recall_texts(agent))
        return memory

    def _recall_texts(self, agent: str) -> Callable[[str | None, str, int], list[str]]:
        def recall(discussion: str | None, query: str, limit: int) -> list[str]:
            result = self._recall(agent, query, discussion=discussion, fresh=False, limit=limit, hyde=False)
            return [h.content for h in result.hits]

        return recall

    def _proxy_append(self, agent: str, discussion: str, items: list[Incoming],
                      ts: int) -> tuple[list[int | None], Appended | None]:
        """Append (turn, id, metadata) items in one write (the k-th at event time `ts` + k): the seq of each item, None
        for one the log held already (a retried request's), and the write's Appended (None when nothing was sent)."""
        from engram.events.messages import MessageAppended
        from engram.memory.ingest.messages import IncomingMessage, discussion_write

        if not items:
            return [], None
        messages = [IncomingMessage(role=role, content=text, name=name, ts_us=ts + k, message_id=mid,
                                    metadata={"source": SOURCE, **metadata})
                    for k, ((role, text, name), mid, metadata) in enumerate(items)]
        write = discussion_write(agent, discussion, messages, max_message_chars=self.config.limits.max_message_chars,
                                 where="messages")
        if write is None:
            return [None] * len(items), None
        self.sync_settings(agent, ts)
        result = self.rt.append([write])[0]
        self.note_streams([write])
        fresh = fresh_seqs(result)  # a message that was only a DiscussionId tag is not in the write
        if result.duplicates:
            sent = [e.event for e in write.events if isinstance(e.event, MessageAppended)]  # every one is
            fresh = self._restore_removed(agent, discussion, sent, fresh, ts)
        kept = iter(fresh)
        return [next(kept) if strip_discussion_tags(m.content) else None for m in messages], result

    def _restore_removed(self, agent: str, discussion: str, sent: list[MessageAppended], fresh: list[int | None],
                         ts: int) -> list[int | None]:
        """Messages the log held already (`fresh` None): a retry's, or one the front end had before and a regenerate
        removed since, sent again (a swipe back to it, or a regenerate that answered it again). That one is brought
        back with the words it is sent with (a `MessageEdited` of the removed message); its seq is the restore's."""
        before = self._message_changes(agent, discussion)
        back = [(k, m) for k, (m, seq) in enumerate(zip(sent, fresh))
                if seq is None and m.message_id in before and before[m.message_id].removed]
        if not back:
            return fresh
        seqs = self._proxy_edits(agent, discussion, [(m.message_id, (m.role, m.content, m.name)) for _, m in back], [],
                                 ts, before)
        fresh = list(fresh)
        for (k, _), seq in zip(back, seqs):
            fresh[k] = seq
        return fresh

    def _proxy_edits(self, agent: str, discussion: str, edited: list[tuple[str, Turn]], removed: list[str],
                     ts: int, before: dict[str, LatestChange] | None = None) -> list[int]:
        """Record what the front end changed in the history it resent: a `MessageEdited` per (message id, (role, text,
        name)) and a `MessageRemoved` per message id, in one write; their seqs. Their ids come from what they say, so a
        retried request records nothing twice. `before`: each message's latest change (`_message_changes`); an edit of a
        removed message brings it back, and its id names the removal it undoes, as a removal's names the change before
        it: a message removed, brought back and removed again is recorded each time."""
        from engram.events.envelope import NewEvent, Write
        from engram.events.messages import MessageEdited, MessageRemoved, change_event_id
        from engram.kernel.tokens import estimate_tokens
        from engram.memory.ingest.history import message_key
        from engram.memory.ingest.messages import MessageRejected

        limit = self.config.limits.max_message_chars
        for mid, (_, text, _) in edited:  # an edit is held to the limit a new message is
            if len(text) > limit:
                raise MessageRejected(f"messages: the edit of message {mid:.60}: {len(text)} characters, over the "
                                      f"limit of {limit} (limits.maxMessageChars)")
        before = before or {}  # message id -> its latest change (`MessageOps._message_changes`)
        prior = {mid: latest.seq for mid, latest in before.items()}
        gone = {mid for mid, latest in before.items() if latest.removed}
        events = [NewEvent(MessageEdited(message_id=mid, role=role, content=text, name=name, source=SOURCE,
                                         token_estimate=estimate_tokens(text)), ts,
                           change_event_id("restored" if mid in gone else "edit", mid, prior.get(mid),
                                           message_key(role, text)))
                  for mid, (role, text, name) in edited]
        events += [NewEvent(MessageRemoved(message_id=mid, source=SOURCE), ts,
                            change_event_id("removed", mid, prior.get(mid))) for mid in removed]
        for event in events:
            event.event.check()
        if not events:
            return []
        write = Write(stream=discussion, agent=agent, events=tuple(events))
        result = self.rt.append([write])[0]
        self.note_streams([write])
        return list(result.seqs)


    def _after_response(self, discussion: str, outcome: WorkflowRun, memory: RuntimeMemory | None = None) -> None:
        """The workflow's memory creators run after the response, one run at a time per discussion: while one runs,
        later requests leave only their latest run pending (the creators cover every message so far, so the ones
        in between have nothing left to do). Their errors are logged, never the caller's. Afterwards the
        discussion's vector store, which they may have rewritten, is opened again here rather than in the path of
        the next request."""
        if outcome.rest is None:
            return
        state = self._proxy_state()
        with self._streams_lock:
            state.pending[discussion] = (outcome, memory)
            if discussion in state.running:
                return
            state.running.add(discussion)
            pool = state.pool
            if pool is None:
                pool = state.pool = MemoryWorkers(MEMORY_WORKERS)
        # A thread kept from earlier runs takes it: starting a thread per response cost the response about 10 ms on
        # busy cores (Thread.start waits until the new thread runs).
        pool.submit(self._memory_worker, discussion)

    def _memory_worker(self, discussion: str) -> None:
        state = self._proxy_state()
        while True:
            with self._streams_lock:
                taken = state.pending.pop(discussion, None)
                if taken is None:
                    state.running.discard(discussion)
                    return
                outcome, memory = taken
            try:
                if outcome.rest is not None:
                    outcome.rest()
                outcome.wait()
                if memory is not None:
                    memory.open_store(discussion)
            except Exception:
                log.exception("the proxy's memory workflow failed after the response (discussion %s)", discussion)

    def wait_proxy_memory(self, timeout: float = 120.0) -> bool:
        """Wait for the memory creation the proxy started after its responses (tests, benchmarks, shutdown)."""
        deadline = time.monotonic() + timeout
        while self._proxy_state().running and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._proxy_state().running

"""The memory behind the OpenAI-compatible proxy: one chat completion, WilmerAI's rules.

- A `[DiscussionId]…[/DiscussionId]` tag in any message switches memory on for that discussion; it is
  stripped before any model sees it. Without a tag the request is answered without memory and nothing
  is appended.
- The front-end resends the whole history every turn: only messages the log does not hold yet are
  appended (`engram.ingest.history`: aligned with the log's tail, so never twice, also when a message is
  edited or the history is cut). System messages are the front-end's instructions, not conversation:
  they reach the model ({chat_system_prompt}) and are not appended.
- The configured memory workflow (`proxy.workflow`; the shipped `openai-proxy.workflow.json` by default)
  injects the discussion's summary, recent memories, search results and the agent's recall into the
  system prompt; its `Standard` node's answer (the configured LLM, or the labelled offline responder) is
  the reply, and is appended too. The nodes after its `WorkflowLock` (memory creation) run after the
  response, in the background, never in its path.
- An LLM outage is a 502/503 with its cause; the user's message is in the log already.
- Streaming (`complete(..., on_text=…)`): the reply's text goes to `on_text` as the model produces it (the
  anthropic provider streams it from the Messages API; the offline heuristic's answer comes whole). The full
  reply is appended once it is complete. If the receiver raises `ReplyAbandoned` (the client went away
  mid-stream), the model's call stops and the reply is NOT appended: the log holds what the conversation
  holds, and a front-end that kept the cut reply resends it with its next turn, when it is appended as any
  new message. The user's message stays in the log either way, as it does after a model error mid-stream.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from engram.api import types as t
from engram.api.clock import now_us
from engram.api.errors import error, llm_failure
from engram.ids import find_discussion_id, strip_discussion_tags, validate_agent

log = logging.getLogger("engram.proxy")

SHIPPED_WORKFLOW = "openai-proxy.workflow.json"
SOURCE = "openai proxy"


def shipped_workflow_path() -> Path:
    return Path(str(resources.files("engram.samples").joinpath(SHIPPED_WORKFLOW)))


@dataclass(frozen=True)
class DiscussionTail:
    """What a server process knows of a discussion's messages in the log: their keys (`message_key`), oldest
    first, the last one at position `seq` with event id `message_id`.

    Shared by every server replica's proxy path, and valid only while the log still holds that same message at
    `seq`: another replica (or the CLI, or a job) may have forgotten the discussion since, which replaces every
    message of it with a tombstone, the tail included, or appended after it. `valid_for(tail_record)` checks it
    against the log's record at `seq`; `extended(records)` adds the records read after it."""

    seq: int
    keys: tuple[str, ...]
    message_id: str | None

    @classmethod
    def of(cls, records) -> "DiscussionTail | None":
        return cls(0, (), None).extended(records) if records else None

    def valid_for(self, record) -> bool:
        """Whether `record` (the log's MessageAppended at `self.seq`, or None if it is not one any more) is the
        message this tail ends with."""
        from engram.ingest.history import message_key

        return (record is not None and record.seq == self.seq and getattr(record.event, "message_id", None) ==
                self.message_id and message_key(record.event.role, record.event.content) == self.keys[-1])

    def extended(self, records) -> "DiscussionTail":
        from engram.ingest.history import message_key

        if not records:
            return self
        last = records[-1]
        return DiscussionTail(last.seq, self.keys + tuple(message_key(r.event.role, r.event.content) for r in records),
                              getattr(last.event, "message_id", None))


class ReplyAbandoned(Exception):
    """Raised by a streamed reply's receiver when nobody listens any more: the model's call stops, the reply is
    not appended."""


class CompletionOps:
    # ------------------------------------------------------------------ what the proxy keeps

    def _proxy_state(self):
        state = self.__dict__.get("_proxy")
        if state is None:
            with self._streams_lock:
                state = self.__dict__.setdefault("_proxy", {"locks": {}, "histories": {}, "workflow": None,
                                                            "background": set()})
        return state

    def _discussion_lock(self, discussion: str) -> threading.Lock:
        locks = self._proxy_state()["locks"]
        with self._streams_lock:
            return locks.setdefault(discussion, threading.Lock())

    def forget_histories(self) -> None:
        """Forgetting erases messages and files: the proxy's view of the log and its open stores are read again."""
        self._proxy_state()["histories"].clear()
        self._proxy_state().pop("memories", None)

    def _logged_keys(self, agent: str, discussion: str) -> list[str]:
        """The discussion's message keys, oldest first: read from the log (not a projection, which may lag).
        After the first time, one read from the remembered tail on (`DiscussionTail`): when the log no longer
        holds the tail message where it was (forgotten through another replica or process), the whole
        discussion is read again. So N server replicas over one log each decide from the log, never from a
        view another replica has made stale."""
        histories = self._proxy_state()["histories"]
        tail: DiscussionTail | None = histories.get((agent, discussion))
        if tail is not None:
            records = self.rt.read(agent, after=tail.seq - 1, stream=discussion, types=["MessageAppended"], limit=None)
            if tail.valid_for(records[0] if records else None):
                tail = tail.extended(records[1:])
                histories[(agent, discussion)] = tail
                return list(tail.keys)
        records = self.rt.read(agent, after=0, stream=discussion, types=["MessageAppended"], limit=None)
        tail = DiscussionTail.of(records)
        if tail is None:
            histories.pop((agent, discussion), None)
            return []
        histories[(agent, discussion)] = tail
        return list(tail.keys)

    def proxy_workflow(self):
        """The memory workflow of the proxy: <home>/workflows/<proxy.workflow>.json, else the shipped one
        (parsed once per file version)."""
        from engram.discussion.workflow import WorkflowError, load, workflow_path
        from engram.llm.routing import check_routes

        path = workflow_path(self.home.root, self.config.proxy.workflow)
        if not path.exists():
            path = shipped_workflow_path()
        stamp = (str(path), path.stat().st_mtime_ns)
        state = self._proxy_state()
        cached = state["workflow"]
        if cached is None or cached[0] != stamp:
            try:
                workflow = load(path)
            except WorkflowError as exc:
                raise error("bad_workflow", f"the proxy's memory workflow: {exc}") from None
            check_routes(self.config.llm, workflow.routes(), workflow.source)
            state["workflow"] = cached = (stamp, workflow)
        return cached[1]

    # ------------------------------------------------------------------ the operation

    def complete(self, agent: str, req: t.CompletionRequest, on_text=None) -> t.CompletionResponse:
        """One chat completion (see the module docstring). `on_text(str)`: receives the reply's text as it is
        produced (streaming); it may raise `ReplyAbandoned`, which propagates once the model's call has stopped."""
        started = time.perf_counter()
        validate_agent(agent)
        discussion = find_discussion_id([m.content for m in req.messages])
        system = "\n\n".join(x for x in (strip_discussion_tags(m.content) for m in req.messages if m.role == "system") if x)
        turns = [(m.role, strip_discussion_tags(m.content), m.name) for m in req.messages if m.role != "system"]
        turns = [x for x in turns if x[1]]
        if not turns:
            raise error("malformed_messages", "the messages hold nothing to answer: give at least one user message with "
                        "text (system messages and DiscussionId tags alone are not a conversation)")
        if discussion is None:
            return self._complete_without_memory(agent, system, turns, req, started, on_text)
        owner = self._streams.get(discussion) or self.refresh_streams().get(discussion)
        if owner is not None and owner != agent:
            raise error("conflict", f"discussion {discussion!r} belongs to agent {owner!r}, not {agent!r}: "
                        "use that agent (model engram/<agent>) or another DiscussionId")
        workflow = self.proxy_workflow()
        with self._discussion_lock(discussion):
            return self._complete_with_memory(agent, discussion, system, turns, req, workflow, started, on_text)

    def _complete_without_memory(self, agent, system, turns, req, started, on_text=None) -> t.CompletionResponse:
        from engram.config import defaults as d
        from engram.llm.types import ChatLine

        lines = [ChatLine(role=role, content=text, seq=i + 1, ts_us=0, name=name) for i, (role, text, name) in enumerate(turns)]
        result = self.tasks().respond(lines, system_prompt=system or None,
                                      max_tokens=req.max_tokens or d.MAX_RESPONSE_SIZE_IN_TOKENS, on_text=on_text)
        if result.llm.error:
            raise llm_failure(result.llm.error)
        total = (time.perf_counter() - started) * 1000
        llm_ms = min(result.llm.latency_ms, total)
        return t.CompletionResponse(agent=agent, discussion=None, reply=result.value.strip(),
                                    responder=f"{result.llm.provider}/{result.llm.model}", appended=0, reply_seq=None,
                                    memory_ms=round(total - llm_ms, 2), llm_ms=round(llm_ms, 2),
                                    input_tokens=result.llm.input_tokens, output_tokens=result.llm.output_tokens)

    def _complete_with_memory(self, agent, discussion, system, turns, req, workflow, started,
                              on_text=None) -> t.CompletionResponse:
        from engram.discussion.workflow import ChatMessage, Responder, RunContext, run
        from engram.discussion.workflow.engine import NodeFailed
        from engram.ingest.history import chain_ids, message_key, new_positions

        keys = [message_key(role, text) for role, text, _ in turns]
        ids = chain_ids(discussion, keys)
        new = new_positions(self._logged_keys(agent, discussion), keys)
        appended_seqs = self._proxy_append(agent, discussion, [(turns[i], ids[i]) for i in new])

        memory = self._proxy_memory(agent)
        ctx = RunContext(discussion=discussion, messages=[ChatMessage(role, text, name) for role, text, name in turns],
                         memory=memory, responder=Responder(self.tasks()), system_prompt=system, stream_to=on_text)
        try:
            outcome = run(workflow, ctx, defer=True)
        except NodeFailed as exc:
            raise error("bad_workflow", f"the proxy's memory workflow: {exc}") from None
        answer = next((r for r in outcome.results if r.id == outcome.response_node), None)
        llm = answer.llm if answer is not None else None
        if llm is not None and llm.error:  # an outage: the user's message is in the log, the error says why
            self._after_response(discussion, outcome)
            where = f" (your message is recorded in discussion {discussion!r}; send it again later)"
            raise llm_failure(llm.error, where)
        reply = outcome.response.strip()
        if not reply:
            raise error("bad_workflow", f"the proxy's memory workflow ({workflow.source}) produced no response: mark a "
                        "Standard node returnToUser")
        reply_seqs = self._proxy_append(agent, discussion, [(("assistant", reply, None),
                                                             chain_ids(discussion, keys + [message_key("assistant", reply)])[-1])],
                                        responder=f"{llm.provider}/{llm.model}" if llm else "workflow")
        self._after_response(discussion, outcome)
        total = (time.perf_counter() - started) * 1000
        llm_ms = min(answer.seconds * 1000, total) if answer is not None and llm is not None else 0.0
        return t.CompletionResponse(
            agent=agent, discussion=discussion, reply=reply,
            responder=f"{llm.provider}/{llm.model}" if llm else "workflow", appended=len(appended_seqs),
            reply_seq=reply_seqs[0] if reply_seqs else None, memory_ms=round(total - llm_ms, 2), llm_ms=round(llm_ms, 2),
            input_tokens=llm.input_tokens if llm else 0, output_tokens=llm.output_tokens if llm else 0)

    def _proxy_memory(self, agent: str):
        """The workflow's memory access for `agent`, kept between requests (its vector stores stay open, reopened
        only when their file changes)."""
        from engram.api.discussion_memory import RuntimeMemory

        memories = self._proxy_state().setdefault("memories", {})
        memory = memories.get(agent)
        if memory is None:
            memory = memories[agent] = RuntimeMemory(self.rt, agent, self.query_embedder(),
                                                     recaller=self._recall_texts(agent))
        return memory

    def _recall_texts(self, agent: str):
        def recall(discussion: str | None, query: str, limit: int) -> list[str]:
            result = self._recall(agent, query, discussion=discussion, fresh=False, limit=limit, hyde=False)
            return [h.content for h in result.hits]

        return recall

    def _proxy_append(self, agent: str, discussion: str, items, **metadata: str) -> list[int]:
        """Append (turn, id) items; the seqs of those the log did not hold (a retried request's are duplicates)."""
        from engram.ingest.messages import IncomingMessage, discussion_write

        if not items:
            return []
        ts = now_us()
        messages = [IncomingMessage(role=role, content=text, name=name, ts_us=ts + k, message_id=mid,
                                    metadata={"source": SOURCE, **metadata})
                    for k, ((role, text, name), mid) in enumerate(items)]
        write = discussion_write(agent, discussion, messages, max_message_chars=self.config.limits.max_message_chars,
                                 where="messages")
        if write is None:
            return []
        self.sync_settings(agent, ts)
        result = self.rt.append([write])[0]
        self.note_streams([write])
        return list(result.seqs)[: len(result.seqs) - result.duplicates] if result.duplicates else list(result.seqs)

    def _after_response(self, discussion: str, outcome) -> None:
        """The workflow's memory creators run after the response, one run at a time per discussion: while one runs,
        later requests leave only their latest run pending (the creators cover every message so far, so the ones
        in between have nothing left to do). Their errors are logged, never the caller's."""
        if outcome.rest is None:
            return
        state = self._proxy_state()
        with self._streams_lock:
            state.setdefault("pending", {})[discussion] = outcome
            if discussion in state.setdefault("running", {}):
                return
            worker = threading.Thread(target=self._memory_worker, args=(discussion,), name=f"proxy-memory-{discussion}",
                                      daemon=True)
            state["running"][discussion] = worker
            state["background"].add(worker)
        worker.start()

    def _memory_worker(self, discussion: str) -> None:
        state = self._proxy_state()
        while True:
            with self._streams_lock:
                outcome = state["pending"].pop(discussion, None)
                if outcome is None:
                    state["running"].pop(discussion, None)
                    state["background"].discard(threading.current_thread())
                    return
            try:
                outcome.rest()
                outcome.wait()
            except Exception:
                log.exception("the proxy's memory workflow failed after the response (discussion %s)", discussion)

    def wait_proxy_memory(self, timeout: float = 120.0) -> bool:
        """Wait for the memory creation the proxy started after its responses (tests, benchmarks, shutdown)."""
        deadline = time.monotonic() + timeout
        while self._proxy_state()["background"] and time.monotonic() < deadline:
            for thread in list(self._proxy_state()["background"]):
                thread.join(max(0.0, deadline - time.monotonic()))
        return not any(th.is_alive() for th in self._proxy_state()["background"])

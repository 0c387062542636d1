"""Operations that do memory work on request: run a workflow, regenerate a discussion, chat."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from engram.api.core import ApiCore
from engram.api import types as t
from engram.api.clock import now_us
from engram.api.errors import error, translate
from engram.api.messages import incoming
from engram.events.messages import MessageAppended
from engram.kernel.ids import validate_agent, validate_discussion
from engram.runtime.base import Report

if TYPE_CHECKING:
    from engram.api.jobs import JobProgress
    from engram.memory.discussion.workflow import Workflow
    from engram.providers.llm.tasks import MemoryTasks

CHAT_SYSTEM_PROMPT = (
    "You are {agent}, an assistant with long-term memory (engram). Use the memory below and the memory passages "
    "when they help; say so when you do not know."
)
# The latest messages of a discussion a workflow sees (chat variables, Standard nodes).
WORKFLOW_MESSAGES = 200


class WorkOps(ApiCore):
    def tasks(self) -> MemoryTasks:
        """The memory tasks (LLM) of this server: anthropic with a key, else the labelled offline heuristic."""
        tasks: MemoryTasks | None = getattr(self, "_tasks", None)
        if tasks is None:
            from engram.providers.llm.factory import make_tasks

            tasks = self._tasks = make_tasks(self.config.llm, home=self.config.home)
        return tasks

    # ------------------------------------------------------------------ workflows

    def _workflow(self, req: t.WorkflowRequest) -> Workflow:
        from engram.config import jsonc
        from engram.memory.discussion.workflow import WorkflowError, load, parse, workflow_path

        given = [x for x in (req.nodes, req.text, req.name) if x is not None]
        if len(given) != 1:
            raise error("bad_workflow", "give exactly one of nodes, text or name")
        source = req.source or "workflow"
        try:
            if req.nodes is not None:
                return parse(req.nodes, source)
            if req.text is not None:
                try:
                    return parse(jsonc.loads(req.text, source), source)
                except jsonc.JsoncError as exc:
                    raise WorkflowError(str(exc)) from None
            assert req.name is not None  # exactly one of the three is given
            path = workflow_path(self.home.root, req.name)
            if not path.exists():
                raise error("unknown_workflow", f"workflow {req.name!r}: no such file, and no {path}")
            return load(path)
        except WorkflowError as exc:
            raise error("bad_workflow", str(exc)) from None

    def run_workflow(self, agent: str, req: t.WorkflowRequest) -> t.WorkflowResponse:
        """Run a WilmerAI workflow of memory nodes on a discussion (its messages appended first). Returns when the
        nodes after a WorkflowLock are done too; `response_ms` is when the response existed."""
        from engram.api.discussion_memory import RuntimeMemory
        from engram.memory.discussion.workflow import ChatMessage, Responder, RunContext, run
        from engram.memory.discussion.workflow.engine import NodeFailed
        from engram.memory.ingest.messages import discussion_write
        from engram.providers.llm.routing import check_routes

        validate_agent(agent)
        workflow = self._workflow(req)
        check_routes(self.config.llm, workflow.routes(), workflow.source)  # a typo fails here, before anything runs
        discussion = self.claim_discussion(agent, req.discussion) if req.discussion else None
        if req.messages and discussion is None:
            raise error("invalid_request", "messages need a discussion (a workflow can also run without one: memory "
                        "nodes then work statelessly)")
        write = None
        if req.messages and discussion is not None:  # (messages without a discussion: refused above)
            write = discussion_write(agent, discussion, incoming(req.messages, where="messages",
                                                                  max_ahead_s=self.config.limits.max_future_seconds),
                                     max_message_chars=self.config.limits.max_message_chars, where="messages")
        appended = 0
        if write is not None:
            self.sync_settings(agent, write.events[0].ts_us)
            result = self.rt.append([write])[0]
            self.note_streams([write])
            appended = len(result.seqs) - result.duplicates
        else:
            self.sync_settings(agent)
        messages = []
        if discussion is not None:
            records = self.rt.read(agent, stream=discussion, types=["MessageAppended"], limit=None)[-WORKFLOW_MESSAGES:]
            messages = [ChatMessage(ev.role, ev.content, ev.name, ev.message_id, r.seq, r.ts_us)
                        for r in records if isinstance(ev := r.event, MessageAppended)]  # every one: read by type
        ctx = RunContext(discussion=discussion, messages=messages,
                         memory=RuntimeMemory(self.rt, agent, self.query_embedder()), responder=Responder(self.tasks()))
        started = time.perf_counter()
        try:
            outcome = run(workflow, ctx)
            outcome.wait()
        except NodeFailed as exc:
            raise error("bad_workflow", str(exc)) from None
        total = time.perf_counter() - started
        return t.WorkflowResponse(
            discussion=discussion, agent=agent, appended=appended, response=outcome.response,
            response_node=outcome.response_node, response_ms=round(outcome.response_seconds * 1000, 1),
            total_ms=round(total * 1000, 1),
            nodes=[t.WorkflowNodeResult(index=r.index + 1, id=r.id, type=r.kind, output=r.output, info=r.info,
                                        ms=round(r.seconds * 1000, 1), background=r.background) for r in outcome.results],
        )

    # ------------------------------------------------------------------ regeneration

    def regenerate(self, agent: str | None, discussion: str, req: t.RegenerateRequest) -> t.Job:
        """WilmerAI's consolidation workflow: a new generation of the discussion's memories from its full history
        (under `settings` if given, recorded in the discussion's stream); the old events stay in the log."""
        from engram.api.discussion_memory import RuntimeMemory
        from engram.config.discussion import DiscussionSettings
        from engram.config.loader import parse
        from engram.memory.discussion.regenerate import HISTORY_TYPES, Generation, NothingToRegenerate
        from engram.providers.llm.routing import check_discussion_settings
        from engram.config.recorded import SCOPE_DISCUSSION
        from engram.memory.settings import settings_event

        agent = self.discussion_agent(discussion, agent)
        settings = None
        if req.settings is not None:  # validated before anything runs
            model = parse(DiscussionSettings, req.settings, req.settings_name)
            check_discussion_settings(model, self.config.llm, req.settings_name)
            settings = settings_event(SCOPE_DISCUSSION, req.settings_name, model)
        self.sync_settings(agent)
        history = self.rt.read(agent, stream=discussion, limit=None, types=list(HISTORY_TYPES))
        try:
            gen = Generation(agent, discussion, history, reason="engram regenerate", ts_us=now_us(), settings=settings)
        except NothingToRegenerate as exc:
            raise error("unknown_discussion", str(exc)) from None
        new, generation, had_summary = gen.number, gen.previous, gen.had_summary

        def work(progress: JobProgress) -> Report:
            started = time.perf_counter()
            self.rt.append([gen.write])
            memory = RuntimeMemory(self.rt, agent, self.query_embedder())
            failed = memory.drain(discussion)
            counts = memory.counts(discussion)
            progress.set(1)
            self._files.pop(agent, None)
            return {"agent": agent, "discussion": discussion, "generation": new, "superseded": generation,
                    "settings": req.settings_name if settings is not None else None, "had_summary": had_summary,
                    **counts, "seconds": round(time.perf_counter() - started, 2), "warning": failed.rstrip("; ") or None}

        return self.jobs.start("regenerate", 1, "generations", work)

    def regenerate_batch(self, req: t.BatchRegenerateRequest) -> t.Job:
        """Regeneration with Claude through the Message Batches API (half the price), as one job for the whole home,
        one agent or one discussion; `resume` continues the job a restart interrupted, from its journal
        (`engram.api.batch_regen`). The offline heuristic has no batch API: refused, never a silent fallback."""
        from engram.api.batch_regen import BatchRegeneration, Claim, Entry, Journal, journal_path

        if req.agent is not None:
            validate_agent(req.agent)
        if req.discussion is not None:
            validate_discussion(req.discussion)
        tasks = self.tasks()
        if getattr(tasks, "provider", "") != "anthropic":
            raise error("invalid_request", "regeneration through the Message Batches API needs Claude (llm.provider "
                        "\"anthropic\" and its API key); the offline heuristic has no batch API: regenerate "
                        "without --batch")
        claim = Claim.take(self.home, wait_s=1.0)  # one job per home, whichever replica of the server runs it
        if claim is None:
            raise error("conflict", "a batch regeneration of this home is running (see `engram jobs`)")
        try:
            journal = Journal(journal_path(self.home))
            if req.resume:
                if req.agent is not None or req.discussion is not None:
                    raise error("invalid_request", "resume continues the interrupted job as it was planned: give "
                                "no agent or discussion")
                if not journal.is_open():
                    raise error("conflict", "no batch regeneration to resume (none was interrupted)")
            else:
                if journal.is_open() and journal.plan is not None:
                    raise error("conflict", f"batch regeneration {journal.plan.job} was interrupted before it "
                                "finished: resume it first (engram regenerate --resume)")
                targets = BatchRegeneration(self, journal).targets(req.agent, req.discussion)
                job_id = f"regen-{uuid.uuid4().hex[:12]}"
                journal.add(Entry("plan", job=job_id, ts_us=now_us(),
                                  targets=[(x.agent, x.discussion, x.through_seq, x.generation) for x in targets]))
            job, plan = BatchRegeneration(self, journal), journal.plan
            assert plan is not None  # resumed: the journal is open; started: the plan was just added
            return self.jobs.start("regenerate", len(plan.targets), "discussions",
                                   lambda progress: job.run(plan.job, progress), on_end=claim.release)
        except BaseException:
            claim.release()
            raise

    def resume_interrupted(self) -> str | None:
        """At server start: continue, as a job, the batch regeneration a restart interrupted, when Claude is
        configured (the offline heuristic has no batch API: `engram status` keeps naming the job). What to tell
        the user, or None when there was nothing to resume or another replica of the server resumed it first. A
        failure to resume is said, never raised: it must not keep the server from starting."""
        from engram.api.batch_regen import interrupted

        try:
            if interrupted(self.home) is None or getattr(self.tasks(), "provider", "") != "anthropic":
                return None
            job = self.regenerate_batch(t.BatchRegenerateRequest(resume=True))
        except Exception as exc:
            known = translate(exc)
            if known is not None and known.code == "conflict":
                return None  # resumed by another replica meanwhile, or finished
            why = known.message if known is not None else f"{type(exc).__name__}: {exc}"
            return f"warning: the interrupted batch regeneration was not resumed: {why}"
        return f"resuming the batch regeneration a restart interrupted (job {job.id})"

    # ------------------------------------------------------------------ chat

    def chat_info(self, agent: str, discussion: str) -> t.ChatInfo:
        """Where a chat stands: earlier messages of the discussion, and who answers."""
        self.claim_discussion(agent, discussion)
        _, rows = self.sql_rows("SELECT count(*) FROM messages WHERE agent = ? AND discussion_id = ?", [agent, discussion])
        return t.ChatInfo(agent=agent, discussion=discussion, messages=sum(r[0] for r in rows),
                          responder=self.tasks().describe())

    def chat(self, agent: str, discussion: str, req: t.ChatRequest) -> t.ChatResponse:
        """One chat turn: the user's message is appended, the reply comes from the `respond` memory task given the
        context engram would send now, and is appended too. Memory creation runs behind it, never in its path.
        If the LLM fails, the user's message stays in the log and the error says why (502/503)."""
        from engram.memory.cognitive.llm_bridge import record_injected
        from engram.memory.context.history import build_context
        from engram.config.home import ProjectionPaths
        from engram.providers.llm.types import ChatLine

        info = self.chat_info(agent, discussion)
        user_seq = self._chat_append(agent, discussion, "user", req.message)
        skip = () if user_seq is None else (user_seq,)
        recall = (lambda q: self.recalled(agent, discussion, q, exclude_seqs=skip)) if req.memory else None
        tasks = self.tasks()
        # The offline responder quotes memory passages only: it keeps what recall found in the recent turns too.
        offline = getattr(tasks, "provider", "") == "offline"
        ctx = build_context(self.sql_rows, self.home, ProjectionPaths(self.home.projections_dir), agent, discussion,
                            recall=recall, query=req.message, skip_raw=not offline)
        lines = [ChatLine(role=x.role, content=x.content, seq=x.seq, ts_us=x.ts_us, name=x.name) for x in ctx.turns
                 if x.role in ("user", "assistant")]
        memory_block = ctx.block("working_memory").text
        system = CHAT_SYSTEM_PROMPT.format(agent=agent) + (f"\n\n{memory_block}" if memory_block else "")
        result = tasks.respond(lines, system_prompt=system, context=ctx.memory_passages() if req.memory else ())
        if result.llm.error:  # an outage: say so (the fallback is no reply of the model); the message stays logged
            from engram.api.errors import llm_failure

            raise llm_failure(result.llm.error, f" (your message is recorded at seq {user_seq}; send it again later)")
        reply = result.value.strip()
        responder = f"{result.llm.provider}/{result.llm.model}"
        # What memory injected for this turn goes with the reply: auto-ingest, the Observer and the Reflector take
        # none of the reply's sentences that repeat it as new (`engram.memory.cognitive.llm_bridge.own_words`).
        injected = (ctx.memory_passages() if req.memory else []) + ([memory_block] if memory_block else [])
        reply_seq = self._chat_append(agent, discussion, "assistant", reply, responder=responder,
                                      **record_injected(injected))
        return t.ChatResponse(agent=agent, discussion=discussion, reply=reply, responder=responder or info.responder,
                              user_seq=user_seq, reply_seq=reply_seq,
                              position=self.position(agent, [s for s in (user_seq, reply_seq) if s]))

    def _chat_append(self, agent: str, discussion: str, role: str, content: str, **metadata: str) -> int | None:
        from engram.memory.ingest.messages import IncomingMessage, discussion_write

        msg = IncomingMessage(role=role, content=content, ts_us=now_us(), message_id=f"chat-{uuid.uuid4().hex[:20]}",
                              metadata={"source": "engram chat", **metadata})
        write = discussion_write(agent, discussion, [msg], max_message_chars=self.config.limits.max_message_chars)
        if write is None:
            return None
        self.sync_settings(agent, msg.ts_us)
        appended = self.rt.append([write])[0]
        self.note_streams([write])
        return appended.seqs[0]

"""Regenerating discussion memory through the Message Batches API: one job for a whole home (or one agent, or
one discussion), at the batch price, resumable after a restart.

The job plans every discussion (`engram.memory.discussion.batch_plan`), then goes in rounds: each round's calls of
the whole home go out as Message Batches through `BatchRunner` (one per endpoint, cut at the configured
maximum of requests per batch), are polled until they end, and their answers are recorded; a discussion
whose calls are all answered is applied at once, as one write (`GenerationStarted(batch=job)` and the events
the live Summarizer would have written for those answers). A request that errored or expired is asked
again in the next round, up to `MAX_ATTEMPTS` times; after that its discussion is reported as failed and
keeps its old generation (nothing half-made is applied).

The journal is a JSON-lines file of the home (`jobs/regenerate-batch.jsonl`): the plan (which discussions,
up to which position, the new generation's time), the batch bookkeeping of `BatchRunner` (prepared,
submitted, collected), every answer and failure, and every discussion applied. After a crash or a server
restart, the server resumes it when it starts (`Api.resume_interrupted`; one process at a time, see `Claim`),
and `engram regenerate --resume` does the same on demand: batches that were accepted are polled and collected,
never submitted again; answers already received are not asked again; discussions already applied are not
written again (and a write that was repeated anyway appends nothing: its event ids are the live ones).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from engram.api.clock import now_us
from engram.api.errors import error
from engram.events.control import GenerationStarted
from engram.events.llm import LlmBatchCollected, LlmBatchPrepared, LlmBatchSubmitted
from engram.events.provenance import LlmCall
from engram.memory.discussion.batch_plan import Target, plan, workflow_problem
from engram.memory.discussion.regenerate import HISTORY_TYPES
from engram.providers.llm.batches import fold
from engram.providers.llm.types import Result, StructuredMemory

if TYPE_CHECKING:
    from engram.api.jobs import JobProgress
    from engram.api.core import ApiCore
    from engram.config.discussion import DiscussionSettings
    from engram.config.home import Home
    from engram.events.envelope import Recorded, Write
    from engram.providers.llm.batches import OpenSubmission
    from engram.providers.llm.inputs import TaskInput

JOURNAL = Path("jobs") / "regenerate-batch.jsonl"
# Held by the process whose job runs the journal (see `Claim`).
CLAIM = Path("jobs") / "regenerate-batch.lock"
# Times one request is asked (the first batch and the retries of what errored or expired).
MAX_ATTEMPTS = 3
_BatchEvent = LlmBatchPrepared | LlmBatchSubmitted | LlmBatchCollected


class Entry(msgspec.Struct, omit_defaults=True):
    """One line of the journal."""

    kind: str  # plan | batch | answer | failure | applied | failed | finished
    job: str = ""
    ts_us: int = 0
    targets: list[tuple[str, str, int, int]] = []  # plan: (agent, discussion, through_seq, generation)
    event: str = ""  # batch: the BatchRunner event as JSON
    key: str = ""  # answer/failure: the call's key
    value: object = None  # answer: the task's value
    llm: LlmCall | None = None  # answer: its provenance
    error: str = ""
    agent: str = ""
    discussion: str = ""
    events: int = 0


class Journal:
    """The job's journal file (append-only lines, flushed and synced: a crash loses at most the line being
    written, which the reader skips). Also the `BatchJournal` of the job's `BatchRunner`."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self.entries: list[Entry] = []
        if path.exists():
            for line in path.read_bytes().splitlines():
                try:
                    self.entries.append(msgspec.json.decode(line, type=Entry))
                except msgspec.DecodeError:
                    continue  # a line cut by a crash

    def add(self, entry: Entry) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "ab") as f:
                f.write(msgspec.json.encode(entry) + b"\n")
                f.flush()
                os.fsync(f.fileno())
            self.entries.append(entry)

    # BatchJournal
    def record(self, event: _BatchEvent) -> None:
        self.add(Entry("batch", event=msgspec.json.encode(event).decode()))

    def open_submissions(self) -> list[OpenSubmission]:
        return fold(msgspec.json.decode(e.event, type=_BatchEvent) for e in self.entries if e.kind == "batch")

    # what the job needs back
    @property
    def plan(self) -> Entry | None:
        return next((e for e in self.entries if e.kind == "plan"), None)

    def is_open(self) -> bool:
        return self.plan is not None and not any(e.kind == "finished" for e in self.entries)

    def answers(self) -> dict[str, Result[Any]]:
        out: dict[str, Result[Any]] = {}
        for e in self.entries:
            if e.kind == "answer" and e.llm is not None:  # (an answer is always journalled with its provenance)
                value = msgspec.convert(e.value, StructuredMemory) if isinstance(e.value, dict) else e.value
                out[e.key] = Result(value=value, llm=e.llm)
        return out

    def failures(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for e in self.entries:
            if e.kind == "failure":
                out.setdefault(e.key, []).append(e.error)
        return out

    def done(self) -> dict[str, Entry]:
        return {e.discussion: e for e in self.entries if e.kind in ("applied", "failed")}

    def batches(self) -> list[str]:
        return [ev.batch_id for e in self.entries if e.kind == "batch" and '"LlmBatchSubmitted"' in e.event
                if isinstance(ev := msgspec.json.decode(e.event, type=_BatchEvent), LlmBatchSubmitted)]


def journal_path(home: Home) -> Path:
    return home.root / JOURNAL


class Claim:
    """The right to run the home's batch regeneration: an exclusive lock on `jobs/regenerate-batch.lock`, taken
    before a job is started and let go when it ends. The replicas of one server (Ray Serve) share the home's files
    but not their memory, and each resumes an interrupted job when it starts: the lock is what keeps two of them
    from running one journal at once (two runs would collect, and apply, the same batches twice over). The kernel
    releases it when its process dies, so a crashed job never holds it."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @classmethod
    def take(cls, home: Home, wait_s: float = 0.0) -> "Claim | None":
        """The claim, or None when another job (of this process or another) holds it. `wait_s`: how long to keep
        trying (`interrupted` holds it for an instant to see whether a job runs)."""
        from engram.kernel.filelock import try_lock

        deadline = time.monotonic() + wait_s
        while (fd := try_lock(home.root / CLAIM)) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return None if fd is None else cls(fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def interrupted(home: Home) -> str | None:
    """What `status` says of a batch regeneration that a restart interrupted (None when there is none, or when a
    job of some replica runs it now)."""
    path = journal_path(home)
    if not path.exists():
        return None
    journal = Journal(path)
    if not journal.is_open() or journal.plan is None:
        return None
    claim = Claim.take(home)
    if claim is None:
        return None  # a job runs it now
    claim.release()
    done = len(journal.done())
    plan_entry = journal.plan
    return (f"batch regeneration {plan_entry.job} was interrupted with {done} of {len(plan_entry.targets)} "
            "discussion(s) done: continue it with `engram regenerate --resume` (POST /v1/regenerate "
            '{"resume": true}); accepted batches are collected, never sent again')


class BatchRegeneration:
    """The job over an `Api` (its runtime, its memory tasks and its query embedder)."""

    def __init__(self, api: ApiCore, journal: Journal, *, poll_interval_seconds: float | None = None) -> None:
        self.api, self.journal = api, journal
        self.poll_interval = poll_interval_seconds
        self._histories: dict[tuple[str, str], list[Recorded]] = {}
        self._settings: dict[tuple[str, str], DiscussionSettings] = {}

    # ------------------------------------------------------------------ planning

    def targets(self, agent: str | None, discussion: str | None) -> list[Target]:
        """The discussions to regenerate and where their history ends now; refused as a whole, before anything is
        recorded, if one of them cannot go through batches."""
        streams = self.api.refresh_streams()  # (agent, discussion)
        if discussion is not None:
            owner = self.api.discussion_agent(discussion, agent)
            chosen = [(owner, discussion)]
        else:
            if agent is not None:
                self.api.require_agent(agent)
            chosen = sorted((a, d) for a, d in streams if not d.startswith("agent:") and (agent is None or a == agent))
        targets: list[Target] = []
        problems: list[str] = []
        for a, d in chosen:
            history = self._history(a, d)
            if not any(r.type == "MessageAppended" for r in history):
                continue  # nothing to regenerate memories from
            problem = workflow_problem(self._settings_of(a, d))
            if problem:
                problems.append(f"{d!r} (agent {a!r}): {problem}")
                continue
            previous = max([r.event.generation for r in history if isinstance(r.event, GenerationStarted)], default=0)
            targets.append(Target(a, d, history[-1].seq, previous + 1))
        if problems:
            raise error("invalid_request", f"cannot regenerate through the Message Batches API: {problems[0]}"
                        + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
        if not targets:
            raise error("unknown_discussion", "no discussion with messages to regenerate")
        return targets

    def _history(self, agent: str, discussion: str, through: int | None = None) -> list[Recorded]:
        key = (agent, discussion)
        if key not in self._histories:
            self._histories[key] = self.api.rt.read(agent, stream=discussion, limit=None, types=list(HISTORY_TYPES))
        history = self._histories[key]
        return history if through is None else [r for r in history if r.seq <= through]

    def _settings_of(self, agent: str, discussion: str) -> DiscussionSettings:
        from engram.memory.settings import SettingsView
        from engram.kernel.ids import agent_stream

        key = (agent, discussion)
        if key not in self._settings:
            view = SettingsView()
            for stream in (agent_stream(agent), discussion):
                for rec in self.api.rt.read(agent, stream=stream, types=["SettingsChanged"], limit=None):
                    view.apply(rec)
            self._settings[key] = view.discussion_settings(agent, discussion)
        return self._settings[key]

    # ------------------------------------------------------------------ running

    def run(self, job: str, progress: JobProgress) -> dict[str, Any]:
        from engram.providers.llm.batches import BatchRunner
        from engram.providers.llm.endpoint_tasks import EndpointTasks

        plan_entry = self.journal.plan
        if plan_entry is None:
            raise error("conflict", "no batch regeneration to run (its journal has no plan)")
        targets = [Target(a, d, int(s), int(g)) for a, d, s, g in plan_entry.targets]
        ts_us, job = plan_entry.ts_us, plan_entry.job
        started = time.perf_counter()
        tasks = self.api.tasks()
        if not isinstance(tasks, EndpointTasks):  # (regenerate_batch refused the offline heuristic already)
            raise error("invalid_request", "regeneration through the Message Batches API needs Claude")
        runner = BatchRunner(tasks, self.journal, poll_interval_seconds=self.poll_interval)
        resumed_batches = len(self.journal.open_submissions())
        progress.set(len(self.journal.done()), len(targets))
        runner.resume(self._collect)  # accepted before a restart: polled and collected, not submitted again
        rounds = 0
        while True:
            answers, failures, done = self.journal.answers(), self.journal.failures(), self.journal.done()
            needed: list[tuple[str, TaskInput]] = []
            for target in targets:
                if target.discussion in done:
                    continue
                outcome = plan(target, self._history(target.agent, target.discussion, target.through_seq),
                               self._settings_of(target.agent, target.discussion), answers, ts_us=ts_us, batch=job)
                if outcome.write is not None:
                    self._apply(target, outcome.write, job)
                    progress.advance()
                    continue
                gave_up = None
                for key, task_input in outcome.needed:
                    tried = failures.get(key, [])
                    if len(tried) >= MAX_ATTEMPTS:
                        gave_up = f"a request failed {len(tried)} times: {tried[-1]}"
                        break
                    needed.append((f"{key}-a{len(tried)}", task_input))
                if gave_up is not None:
                    needed = [n for n in needed if not n[0].startswith(outcome.needed[0][0].rsplit("-", 2)[0] + "-")]
                    self.journal.add(Entry("failed", agent=target.agent, discussion=target.discussion, error=gave_up))
                    progress.advance()
            if not needed:
                break
            rounds += 1
            runner.run(needed, self._collect)
        done = self.journal.done()
        applied = [e for e in done.values() if e.kind == "applied"]
        failed = {e.discussion: e.error for e in done.values() if e.kind == "failed"}
        answers = self.journal.answers()
        self.journal.add(Entry("finished", job=job, ts_us=now_us()))
        finished = self.journal.path.with_name(f"regenerate-batch-{job}.jsonl")
        os.replace(self.journal.path, finished)  # a new batch regeneration may start; this one stays readable
        return {
            "job": job, "discussions": len(targets), "applied": len(applied), "failed": failed,
            "events": sum(e.events for e in applied), "requests": len(answers),
            "retried": sum(len(v) for v in self.journal.failures().values()),
            "batches": len(set(self.journal.batches())), "rounds_this_run": rounds,
            "resumed_batches": resumed_batches,
            "cost_usd": round(sum(r.llm.cost_usd or 0 for r in answers.values()), 6),
            "journal": str(finished), "seconds": round(time.perf_counter() - started, 2),
        }

    def _collect(self, results: dict[str, Result[Any]]) -> None:
        """A batch's results by custom id: answers recorded; errored and expired requests recorded as failures
        (asked again in the next round)."""
        for cid, result in results.items():
            key = cid.rsplit("-a", 1)[0]
            if result.failed:
                self.journal.add(Entry("failure", key=key, error=result.llm.error or "failed"))
            else:
                self.journal.add(Entry("answer", key=key, value=msgspec.to_builtins(result.value), llm=result.llm))

    def _apply(self, target: Target, write: Write, job: str) -> None:
        from engram.memory.discussion.summarizer import embed_pending
        from engram.events.envelope import Write

        now = self.api.rt.read(target.agent, stream=target.discussion, types=["GenerationStarted"], limit=None)
        latest = max((r.event for r in now if isinstance(r.event, GenerationStarted)), key=lambda e: e.generation,
                     default=None)
        if latest is not None and latest.generation >= target.generation and latest.batch != job:
            self.journal.add(Entry("failed", agent=target.agent, discussion=target.discussion,
                                   error=f"generation {latest.generation} was started meanwhile "
                                         f"({latest.reason}); nothing applied"))
            return
        events = embed_pending(write.events, self.api.query_embedder())
        result = self.api.rt.append([Write(write.stream, write.agent, tuple(events))])[0]
        self.api._files.pop(target.agent, None)
        self.journal.add(Entry("applied", agent=target.agent, discussion=target.discussion,
                               events=len(result.seqs) - result.duplicates))

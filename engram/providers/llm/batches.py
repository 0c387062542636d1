"""Bulk regeneration through the Message Batches API: submit, poll, collect, map back by custom_id, resume.

Durability: every step is written to a `BatchJournal` first (see `engram.events.llm`):

    prepared  --submit-->  submitted  --poll, collect, handle(results)-->  collected

`EventLogJournal` keeps these as events in the agent's stream of the event log, so after a crash
`BatchRunner.resume(handle)` submits what was prepared but never accepted, and collects what was
accepted but never handed on. Results reach `handle` at least once (a crash after `handle` and
before the journal write repeats it): make `handle` idempotent, e.g. by event ids from custom_ids.
"""

from __future__ import annotations

import re
import time
from typing import Callable, Iterable, Protocol, Sequence

import msgspec

from engram.events.llm import BatchRequestRecord, LlmBatchCollected, LlmBatchPrepared, LlmBatchSubmitted
from engram.config.errors import ConfigError
from engram.providers.llm import inputs as i
from engram.providers.llm.endpoint_tasks import EndpointTasks, Prepared
from engram.providers.llm.caller import completion_of
from engram.providers.llm.hashing import digest
from engram.providers.llm.types import Result

# The API's rule for custom ids.
CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
JOURNAL_EVENT_TYPES = ("LlmBatchPrepared", "LlmBatchSubmitted", "LlmBatchCollected")

Handler = Callable[[dict[str, Result]], None]


class OpenSubmission(msgspec.Struct, frozen=True):
    prepared: LlmBatchPrepared
    batch_id: str | None  # None: recorded, never accepted by the API


class BatchJournal(Protocol):
    """Where batch bookkeeping survives a crash."""

    def record(self, event: LlmBatchPrepared | LlmBatchSubmitted | LlmBatchCollected) -> None: ...

    def open_submissions(self) -> list[OpenSubmission]: ...


def fold(events: Iterable[object]) -> list[OpenSubmission]:
    """Open submissions from journal events in log order."""
    prepared: dict[str, LlmBatchPrepared] = {}
    batch_ids: dict[str, str] = {}
    for e in events:
        if isinstance(e, LlmBatchPrepared):
            prepared[e.submission_id] = e
        elif isinstance(e, LlmBatchSubmitted):
            batch_ids[e.submission_id] = e.batch_id
        elif isinstance(e, LlmBatchCollected):
            prepared.pop(e.submission_id, None)
    return [OpenSubmission(p, batch_ids.get(sid)) for sid, p in prepared.items()]


class EventLogJournal:
    """The journal as events of stream `agent:<agent>` in an EventStore (anything with `append`
    and `iter_events`, e.g. `engram.events.store.EventStore`)."""

    def __init__(self, store, agent: str):
        self.store = store
        self.agent = agent
        self.stream = f"agent:{agent}"

    def record(self, event) -> None:
        self.store.append(self.stream, [event], agent=self.agent)

    def open_submissions(self) -> list[OpenSubmission]:
        recorded = self.store.iter_events(stream=self.stream, types=list(JOURNAL_EVENT_TYPES))
        return fold(r.event for r in recorded)


class BatchRunner:
    """Runs many task inputs as Message Batches of one EndpointTasks provider."""

    def __init__(
        self,
        tasks: EndpointTasks,
        journal: BatchJournal,
        *,
        poll_interval_seconds: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.tasks = tasks
        self.journal = journal
        settings = tasks.config.batches
        self.poll_interval = settings.poll_interval_seconds if poll_interval_seconds is None else poll_interval_seconds
        self.max_requests = settings.max_requests_per_batch
        self._sleep = sleep

    # ------------------------------------------------------------------ submit

    def submit(self, items: Sequence[tuple[str, i.TaskInput]]) -> list[str]:
        """Record and submit `items` (custom_id, task input); returns the submission ids.

        Items are grouped by the endpoint their task is routed to and cut into batches of at most
        `batches.maxRequestsPerBatch`. Submitting the same items again reuses the open submission.
        """
        ids = [cid for cid, _ in items]
        bad = [cid for cid in ids if not CUSTOM_ID.match(cid)]
        if bad:
            raise ValueError(f"custom ids must match {CUSTOM_ID.pattern}: {bad[:3]}")
        if len(set(ids)) != len(ids):
            raise ValueError("custom ids must be unique")
        by_endpoint: dict[str, list[tuple[str, i.TaskInput, Prepared]]] = {}
        for cid, task_input in items:
            prepared = self.tasks.prepare(task_input)
            by_endpoint.setdefault(prepared.endpoint_name, []).append((cid, task_input, prepared))
        open_ids = {s.prepared.submission_id: s for s in self.journal.open_submissions()}
        submissions = []
        for endpoint, group in by_endpoint.items():
            for start in range(0, len(group), self.max_requests):
                part = group[start : start + self.max_requests]
                submission_id = "sub-" + digest(endpoint, *(cid for cid, _, _ in part))
                if submission_id not in open_ids:
                    record = LlmBatchPrepared(
                        submission_id=submission_id,
                        endpoint=endpoint,
                        requests=tuple(
                            BatchRequestRecord(
                                custom_id=cid,
                                task_input=i.encode_input(t),
                                prompt_hash=p.prompt_hash,
                                model=p.request.model,
                            )
                            for cid, t, p in part
                        ),
                    )
                    self.journal.record(record)
                    self._send(record, [p for _, _, p in part])
                elif open_ids[submission_id].batch_id is None:
                    self._send(open_ids[submission_id].prepared)
                submissions.append(submission_id)
        return submissions

    def _send(self, record: LlmBatchPrepared, prepared: list[Prepared] | None = None) -> str:
        if prepared is None:
            prepared = [self._prepared(r, record.endpoint) for r in record.requests]
        requests = [{"custom_id": r.custom_id, "params": p.request.params()} for r, p in zip(record.requests, prepared)]
        client = self.tasks.client(record.endpoint)
        api_type = self.tasks.config.endpoints[record.endpoint].api_type
        if api_type != "claudeMessages":
            raise ConfigError(f"Message Batches are Anthropic's: endpoint {record.endpoint!r} is an {api_type} one; "
                              "regenerate without --batch, or route these tasks to a claudeMessages endpoint")
        batch, _ = client.with_retries(lambda: client.client.messages.batches.create(requests=requests))
        self.journal.record(LlmBatchSubmitted(submission_id=record.submission_id, batch_id=batch.id))
        return batch.id

    def _prepared(self, r: BatchRequestRecord, endpoint: str) -> Prepared:
        """The request as submitted: rendered again from the recorded input, labelled as recorded."""
        p = self.tasks.prepare(i.decode_input(r.task_input))
        request = msgspec.structs.replace(p.request, model=r.model)
        return Prepared(p.task, endpoint, request, r.prompt_hash)

    # ------------------------------------------------------------------ poll and collect

    def wait(self, submission_id: str, handle: Handler | None = None) -> dict[str, Result]:
        """Poll the submission's batch until it ends, collect its results, hand them on, close it."""
        for s in self.journal.open_submissions():
            if s.prepared.submission_id == submission_id:
                return self._finish(s, handle)
        raise KeyError(f"no open batch submission {submission_id!r}")

    def resume(self, handle: Handler | None = None) -> dict[str, dict[str, Result]]:
        """Finish every open submission of the journal (after a crash, or a restart)."""
        out: dict[str, dict[str, Result]] = {}
        for s in self.journal.open_submissions():
            out[s.prepared.submission_id] = self._finish(s, handle)
        return out

    def run(self, items: Sequence[tuple[str, i.TaskInput]], handle: Handler | None = None) -> dict[str, Result]:
        """Submit `items` and wait for all of them: results by custom_id."""
        results: dict[str, Result] = {}
        for submission_id in self.submit(items):
            results.update(self.wait(submission_id, handle))
        return results

    def _finish(self, s: OpenSubmission, handle: Handler | None) -> dict[str, Result]:
        record = s.prepared
        batch_id = s.batch_id or self._send(record)
        client = self.tasks.client(record.endpoint)
        start = self.tasks.clock()
        while True:
            batch, _ = client.with_retries(lambda: client.client.messages.batches.retrieve(batch_id))
            if batch.processing_status == "ended":
                break
            self._sleep(self.poll_interval)
        lines, _ = client.with_retries(lambda: list(client.client.messages.batches.results(batch_id)))
        by_id = {line.custom_id: line.result for line in lines}
        results: dict[str, Result] = {}
        for r in record.requests:
            task_input = i.decode_input(r.task_input)
            prepared = self._prepared(r, record.endpoint)
            outcome = by_id.get(r.custom_id)
            if outcome is not None and outcome.type == "succeeded":
                completion = completion_of(outcome.message)
                if prepared.request.structured is not None:  # asked for as the output format (Request.params)
                    completion = msgspec.structs.replace(completion, structured="output_format")
                results[r.custom_id] = self.tasks.finish(task_input, prepared, completion, 1, start, batch_id=batch_id)
            else:
                error = _batch_error(outcome)
                results[r.custom_id] = self.tasks.failure(task_input, prepared, error, 1, start, batch_id=batch_id)
        if handle is not None:
            handle(results)
        failed = sum(1 for res in results.values() if res.failed)
        self.journal.record(
            LlmBatchCollected(
                submission_id=record.submission_id, batch_id=batch_id, succeeded=len(results) - failed, failed=failed
            )
        )
        return results


def _batch_error(outcome) -> str:
    if outcome is None:
        return "missing from the batch results"
    if outcome.type == "errored":
        err = getattr(getattr(outcome.error, "error", None), "message", None) or str(outcome.error)
        return f"batch request errored: {err}"
    return f"batch request {outcome.type}"

"""`AnthropicTasks`: every memory task as a Messages API call, with recorded failures instead of crashes.

A task renders its templates, calls its routed endpoint (retries inside), and decodes the answer.
An answer that is not the JSON asked for gets one repair request; if that fails too, or the call
fails for good, the result carries `llm.error` and the offline heuristic's value, labelled as
such by `llm.fallback`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import msgspec

from engram.config.errors import ConfigError
from engram.config.llm import Endpoint, LlmConfig, Preset, TaskRoute
from engram.events.provenance import LlmCall
from engram.providers.llm import inputs as i
from engram.providers.llm.answers import AnswerInvalid, SPECS
from engram.providers.llm.caller import CallFailed, Completion, MessagesClient, Request, request_for
from engram.providers.llm.hashing import digest
from engram.providers.llm.offline.provider import compute as offline_compute
from engram.providers.llm.offline.tuning import OFFLINE_MODEL
from engram.providers.llm.pricing import cost_usd
from engram.providers.llm.prompts import PromptTemplates, render
from engram.providers.llm.tasks import MemoryTasks
from engram.providers.llm.types import Result

PROVIDER = "anthropic"


class Prepared(msgspec.Struct, frozen=True):
    """A rendered task: the request to send and what provenance needs to know about it."""

    task: str
    endpoint_name: str
    request: Request
    prompt_hash: str


@dataclass(frozen=True)
class Route:
    """Where one call goes: a configured endpoint and preset, and the response size the route sets."""

    endpoint_name: str
    endpoint: Endpoint
    preset: Preset
    # The task route's maxResponseSizeInTokens; None when the call routes itself (its own size wins).
    max_response_size_in_tokens: int | None = None


class _Usage:
    """Token usage over a call and its repair; a batch answer is billed at the batch rate, its repair is not."""

    def __init__(self) -> None:
        self.parts: list[tuple[Completion, bool]] = []

    def add(self, c: Completion, batched: bool = False) -> None:
        self.parts.append((c, batched))

    def total(self, field: str) -> int:
        return sum(getattr(c, field) for c, _ in self.parts)

    def cost(self, model: str, prices: dict) -> float:
        return round(
            sum(
                cost_usd(
                    model,
                    input_tokens=c.input_tokens,
                    output_tokens=c.output_tokens,
                    cache_read_tokens=c.cache_read_tokens,
                    cache_write_tokens=c.cache_write_tokens,
                    batch=batched,
                    overrides=prices,
                )
                for c, batched in self.parts
            ),
            8,
        )


class AnthropicTasks(MemoryTasks):
    provider = PROVIDER

    def __init__(
        self,
        config: LlmConfig,
        *,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.config = config
        self.templates = PromptTemplates(config.prompts_dir)
        self._env = os.environ if env is None else env
        self._sleep = sleep
        self.clock = clock  # latency for provenance only
        self._clients: dict[str, MessagesClient] = {}

    def describe(self) -> str:
        default = self.config.endpoints["default"]
        routed = {r.endpoint_name for r in self.config.tasks.values()} - {"default"}
        extra = f"; tasks routed to {sorted(routed)} too" if routed else ""
        return f"anthropic ({default.model} via endpoint 'default'{extra})"

    # ------------------------------------------------------------------ routing and prompts

    def unroutable(self, named) -> list[str]:
        from engram.providers.llm.routing import route_problems

        return route_problems(self.config, named)

    def route(self, task: str, endpoint_name: str | None = None, preset: str | None = None) -> Route:
        """The route of one call: its own endpoint/preset where it names them, else the task's
        configured route (`llm.tasks`), else "default". A name that is not configured raises a
        ConfigError naming the closest one (a configuration problem, not a failed call)."""
        problem = self.config.route_problem(endpoint_name, preset)
        if problem:
            raise ConfigError(f"a {task} call names {problem}")
        r = self.config.tasks.get(task, TaskRoute())
        name = endpoint_name or r.endpoint_name
        routed_by_call = endpoint_name is not None or preset is not None
        return Route(
            endpoint_name=name,
            endpoint=self.config.endpoints[name],
            preset=self.config.presets[preset or r.preset],
            max_response_size_in_tokens=None if routed_by_call else r.max_response_size_in_tokens,
        )

    def client(self, endpoint_name: str) -> MessagesClient:
        if endpoint_name not in self._clients:
            endpoint = self.config.endpoints[endpoint_name]
            key = self._env.get(endpoint.api_key_env, "")
            if not key:
                raise CallFailed(f"endpoint {endpoint_name!r}: environment variable {endpoint.api_key_env} is not set", 0)
            self._clients[endpoint_name] = MessagesClient(endpoint, key, sleep=self._sleep)
        return self._clients[endpoint_name]

    def prepare(self, task_input: i.TaskInput) -> Prepared:
        task = task_input.task
        spec = SPECS[task]
        route = self.route(task, task_input.endpoint_name, task_input.preset)
        values = spec.values(task_input)
        system = render(getattr(task_input, "system_prompt", None) or self.templates.system(task), values)
        if spec.turns is not None:
            messages = spec.turns(task_input, values, self.templates, system)
        else:
            prompt = getattr(task_input, "prompt", None) or self.templates.prompt(task)
            messages = (("user", render(prompt, values)),)
        max_tokens = route.max_response_size_in_tokens or spec.response_tokens(task_input) or route.preset.max_tokens
        request = request_for(route.endpoint, route.preset, system=system, messages=messages, max_tokens=max_tokens)
        prompt_hash = digest(route.endpoint.model, system, *(text for _, text in messages))
        return Prepared(task, route.endpoint_name, request, prompt_hash)

    def repair_request(self, prepared: Prepared, answer: str, error: str) -> Request:
        template = "repair.prompt.txt" if SPECS[prepared.task].expects_json else "repair_text.prompt.txt"
        repair = render(self.templates.get(template), {"Error": error})
        messages = prepared.request.messages + (("assistant", answer or "(empty)"), ("user", repair))
        return msgspec.structs.replace(prepared.request, messages=messages)

    # ------------------------------------------------------------------ running

    def run(self, task_input: i.TaskInput) -> Result:
        start = self.clock()
        prepared = self.prepare(task_input)
        try:
            completion, attempts = self.client(prepared.endpoint_name).create(prepared.request)
        except CallFailed as failed:
            return self.failure(task_input, prepared, failed.error, failed.attempts, start, transient=failed.transient)
        return self.finish(task_input, prepared, completion, attempts, start)

    def stream(self, task_input: i.TaskInput, on_text: Callable[[str], None]) -> Result:
        """`run` with the answer streamed from the model (`MessagesClient.stream`): each text delta goes to
        `on_text` as it arrives. An answer that needed a repair (empty) passes the repaired answer at once."""
        if SPECS[task_input.task].expects_json:
            return super().stream(task_input, on_text)  # a JSON answer means nothing until it is whole
        start = self.clock()
        prepared = self.prepare(task_input)
        streamed: list[str] = []

        def passed_on(text: str) -> None:
            streamed.append(text)
            on_text(text)

        try:
            completion, attempts = self.client(prepared.endpoint_name).stream(prepared.request, passed_on)
        except CallFailed as failed:
            return self.failure(task_input, prepared, failed.error, failed.attempts, start, transient=failed.transient)
        result = self.finish(task_input, prepared, completion, attempts, start)
        if not result.llm.error and not "".join(streamed).strip() and isinstance(result.value, str):
            on_text(result.value)  # the first answer was empty: the repaired one
        return result

    def finish(
        self,
        task_input: i.TaskInput,
        prepared: Prepared,
        completion: Completion,
        attempts: int,
        start: float,
        batch_id: str | None = None,
    ) -> Result:
        """Decode `completion` (repairing once if needed) into the task's result."""
        spec = SPECS[prepared.task]
        usage = _Usage()
        usage.add(completion, batched=batch_id is not None)
        try:
            value = spec.decode(task_input, completion.text)
        except AnswerInvalid as invalid:
            request = self.repair_request(prepared, completion.text, str(invalid))
            try:
                repaired, more = self.client(prepared.endpoint_name).create(request)
            except CallFailed as failed:
                error = f"answer invalid ({invalid}); the repair request failed: {failed.error}"
                return self.failure(task_input, prepared, error, attempts + failed.attempts, start, usage, batch_id,
                                    transient=failed.transient)
            attempts += more
            usage.add(repaired)
            try:
                value = spec.decode(task_input, repaired.text)
            except AnswerInvalid as still:
                error = f"answer invalid after one repair: {still}"
                return self.failure(task_input, prepared, error, attempts, start, usage, batch_id)
        return Result(value=value, llm=self.provenance(prepared, usage, attempts, start, batch_id=batch_id))

    def failure(
        self,
        task_input: i.TaskInput,
        prepared: Prepared,
        error: str,
        attempts: int,
        start: float,
        usage: _Usage | None = None,
        batch_id: str | None = None,
        *,
        transient: bool = False,
    ) -> Result:
        """A recorded failure: the offline heuristic's value, labelled, with the error."""
        llm = self.provenance(prepared, usage or _Usage(), attempts, start, error=error, batch_id=batch_id)
        return Result(value=offline_compute(task_input), llm=llm, transient=transient)

    def provenance(
        self,
        prepared: Prepared,
        usage: _Usage,
        attempts: int,
        start: float,
        *,
        error: str | None = None,
        batch_id: str | None = None,
    ) -> LlmCall:
        model = prepared.request.model
        cache_read, cache_write = usage.total("cache_read_tokens"), usage.total("cache_write_tokens")
        return LlmCall(
            provider=PROVIDER,
            model=model,
            task=prepared.task,
            prompt_hash=prepared.prompt_hash,
            endpoint=prepared.endpoint_name,
            input_tokens=usage.total("input_tokens") + cache_read + cache_write,
            output_tokens=usage.total("output_tokens"),
            latency_ms=round((self.clock() - start) * 1000.0, 3),
            cost_usd=usage.cost(model, self.config.prices),
            error=error,
            fallback=OFFLINE_MODEL if error else None,
            attempts=attempts,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            batch_id=batch_id,
        )

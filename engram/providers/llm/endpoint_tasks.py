"""`EndpointTasks`: every memory task as a call to its routed endpoint, with recorded failures instead of crashes.

A task renders its templates, is routed (`llm.tasks`, or the call's own endpoint/preset) to one configured
endpoint of any apiType, is sized to that endpoint's context window, calls it (retries inside the endpoint's
client), and decodes the answer. A JSON answer is asked for the strongest way the endpoint supports (recorded as
`LlmCall.structured`); an answer that is not the JSON asked for gets one repair request (`LlmCall.repaired`); if
that fails too, or the call fails for good, the result carries `llm.error` and the offline heuristic's value,
labelled as such by `llm.fallback`.

Clients: `claudeMessages` endpoints keep the anthropic SDK (`caller.MessagesClient`: prompt caching, Message
Batches); every other type is an `engram.providers.endpoints.client.EndpointClient`.
"""

from __future__ import annotations

import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

import msgspec

from engram.config import defaults as d
from engram.config.errors import ConfigError
from engram.config.llm import Endpoint, LlmConfig, Preset, TaskRoute
from engram.events.provenance import LlmCall
from engram.providers.llm import inputs as i
from engram.providers.llm.answers import AnswerInvalid, SPECS
from engram.providers.endpoints.wire import Sampling, Structured
from engram.providers.llm.answers.schemas import SCHEMAS, bounded
from engram.providers.llm.caller import CallFailed, Completion, MessagesClient, Request, request_for
from engram.providers.llm.hashing import digest
from engram.providers.llm.offline.provider import compute as offline_compute
from engram.providers.llm.offline.tuning import OFFLINE_MODEL
from engram.providers.llm.pricing import cost_usd
from engram.providers.llm.prompts import PromptTemplates, render
from engram.providers.llm.tasks import MemoryTasks
from engram.providers.llm.types import Result

PROVIDER = "anthropic"  # LlmCall.provider of claudeMessages calls (as before apiType); other types record the apiType
# Tokens a chat message costs beyond its text (role markers), and the share added to every estimate.
MESSAGE_OVERHEAD_TOKENS = 8
ESTIMATE_MARGIN = 1.05
# The least room for an answer a prompt may leave (below it the prompt is too large for the window).
MIN_ANSWER_TOKENS = 64
# Tasks over conversation lines whose answer for the whole is the answers for its halves, joined.
SPLITTABLE = (i.SummarizeChunk, i.Observe, i.ExtractFacts)


def provider_of(endpoint: Endpoint) -> str:
    return PROVIDER if endpoint.api_type == "claudeMessages" else endpoint.api_type


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


def answer_size(route: Route, asked: int | None, front_end: Sampling | None) -> int:
    """The most tokens a call's answer may take. The size asked for: the front end's max_tokens (the proxy's reply,
    unless the preset overrides the front end's samplers and sets maxTokens), else the task route's
    maxResponseSizeInTokens, else the caller's own (a workflow node's maxResponseSizeInTokens), else
    d.PRESET_MAX_TOKENS. The preset's maxTokens, when set, caps it whichever it is."""
    cap = route.preset.max_tokens
    front = front_end.max_tokens if front_end is not None else None
    if cap is not None and route.preset.front_end_samplers == "override":
        front = None
    size = front or route.max_response_size_in_tokens or asked or d.PRESET_MAX_TOKENS
    return min(size, cap) if cap is not None else size


class _Usage:
    """Token usage over a call and its repair; a batch answer is billed at the batch rate, its repair is not."""

    def __init__(self) -> None:
        self.parts: list[tuple[Completion, bool]] = []

    def add(self, c: Completion, batched: bool = False) -> None:
        self.parts.append((c, batched))

    def total(self, field: str) -> int:
        return sum(getattr(c, field) for c, _ in self.parts)

    def cost(self, model: str, prices: dict, local: bool = False) -> float:
        if local:
            return 0.0  # a server the user runs: "local" in the cost view, never "no price known"
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


class EndpointTasks(MemoryTasks):
    """Memory tasks answered by the configured endpoints (any apiType), routed per task."""

    def __init__(
        self,
        config: LlmConfig,
        *,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.perf_counter,
        slots_dir=None,
    ):
        self.config = config
        self._slots_dir = slots_dir  # <home>/run/llm: concurrency slots shared by the home's processes
        self.templates = PromptTemplates(config.prompts_dir)
        self._env = os.environ if env is None else env
        self._sleep = sleep
        self.clock = clock  # latency for provenance only
        self._clients: dict = {}
        self._clients_lock = threading.Lock()
        default = config.endpoints["default"]
        # "anthropic" when the default endpoint is Claude (as before apiType), else "endpoints".
        self.provider = PROVIDER if default.api_type == "claudeMessages" else "endpoints"

    def describe(self) -> str:
        default = self.config.endpoints["default"]
        routed = {r.endpoint_name for r in self.config.tasks.values()} - {"default"}
        extra = f"; tasks routed to {sorted(routed)} too" if routed else ""
        if default.api_type == "claudeMessages":
            return f"anthropic ({default.model} via endpoint 'default'{extra})"
        model = default.model or "(the server's model)"
        return f"{default.api_type} ({model} at {default.url} via endpoint 'default'{extra})"

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

    def client(self, endpoint_name: str):
        """The endpoint's client, made once: a MessagesClient (claudeMessages) or an EndpointClient."""
        with self._clients_lock:
            if endpoint_name not in self._clients:
                endpoint = self.config.endpoints[endpoint_name]
                if endpoint.api_type == "claudeMessages":
                    key = self._env.get(endpoint.key_env or "", "")
                    if not key:
                        raise CallFailed(f"endpoint {endpoint_name!r}: environment variable {endpoint.key_env} is "
                                         "not set", 0)
                    self._clients[endpoint_name] = MessagesClient(endpoint, key, sleep=self._sleep, name=endpoint_name)
                else:
                    from engram.providers.endpoints.client import EndpointClient

                    self._clients[endpoint_name] = EndpointClient(endpoint_name, endpoint, env=self._env,
                                                                  sleep=self._sleep, slots_dir=self._slots_dir)
            return self._clients[endpoint_name]

    def sampling(self, preset: Preset, front_end: Sampling | None) -> Sampling:
        """The samplers of a call: the front end's (the proxy) over the preset's, unless the preset overrides."""
        own = Sampling(temperature=preset.temperature, top_p=preset.top_p, top_k=preset.top_k, stop=preset.stop,
                       seed=preset.seed)
        if front_end is None:
            return own
        return own.over(front_end) if preset.front_end_samplers == "override" else front_end.over(own)

    def prepare(self, task_input: i.TaskInput) -> Prepared:
        """The request of one task, sized to its endpoint's window (see `fit`), and its prompt hash."""
        task = task_input.task
        spec = SPECS[task]
        route = self.route(task, task_input.endpoint_name, task_input.preset)
        while True:
            smaller = droppable(task_input)
            try:
                request = self.fit(task_input, route, self.render_request(task_input, route), last=smaller is None)
                break
            except PromptTooLarge:
                if smaller is None:
                    raise
                task_input = smaller  # what the guides drop first, then try again
        if spec.expects_json and task in SCHEMAS:
            # Bounded to the answer's budget, so that a constrained decoder closes every string and array in time.
            budget_chars = int(request.max_tokens / route.endpoint.tokens_per_char / ESTIMATE_MARGIN)
            request = msgspec.structs.replace(request, structured=Structured(task, bounded(SCHEMAS[task], budget_chars)))
        parts = (route.endpoint.model, request.system, *(text for _, text in request.messages))
        if request.prompt is not None:
            parts += (request.prompt,)
        if request.asks is not None:  # a front end's format, images and options make another prompt too
            parts += (msgspec.json.encode(request.asks).decode(),)
        if route.endpoint.api_type != "claudeMessages":
            parts = (route.endpoint.api_type, *parts)  # the same prompt to another kind of server is another prompt
        return Prepared(task, route.endpoint_name, request, digest(*parts))

    def render_request(self, task_input: i.TaskInput, route: Route) -> Request:
        task = task_input.task
        spec = SPECS[task]
        values = spec.values(task_input)
        system = render(getattr(task_input, "system_prompt", None) or self.templates.system(task), values)
        completion_prompt = getattr(task_input, "completion_prompt", "") or None
        if completion_prompt is not None and not getattr(task_input, "lines", ()):
            messages: tuple[tuple[str, str], ...] = ()
            system = getattr(task_input, "system_prompt", None) or ""
        elif spec.turns is not None:
            messages = spec.turns(task_input, values, self.templates, system)
        else:
            prompt = getattr(task_input, "prompt", None) or self.templates.prompt(task)
            messages = (("user", render(prompt, values)),)
        front_end = getattr(task_input, "sampling", None)
        sampling = self.sampling(route.preset, front_end)
        max_tokens = answer_size(route, spec.response_tokens(task_input), front_end)
        request = request_for(route.endpoint, route.preset, system=system, messages=messages, max_tokens=max_tokens)
        asks = front_end.asks if front_end is not None else None
        return msgspec.structs.replace(
            request, temperature=sampling.temperature,
            sampling=Sampling(top_p=sampling.top_p, top_k=sampling.top_k, stop=sampling.stop, seed=sampling.seed),
            prompt=completion_prompt, asks=asks,
            # A front end's format: its JSON, asked for the strongest way the endpoint takes (as the memory tasks ask).
            structured=asks.format if asks is not None else None,
        )

    # ------------------------------------------------------------------ context

    def window(self, endpoint_name: str) -> int | None:
        endpoint = self.config.endpoints[endpoint_name]
        if endpoint.api_type == "claudeMessages" or endpoint.api_type == "offline":
            return endpoint.max_context_tokens
        try:
            return self.client(endpoint_name).window()[0]
        except CallFailed:
            return endpoint.max_context_tokens

    @staticmethod
    def needed_tokens(endpoint: Endpoint, request: Request) -> int:
        """The prompt's size in tokens, estimated from its characters (`charsPerToken`) with a margin."""
        chars = len(request.system) + sum(len(t) for _, t in request.messages) + len(request.prompt or "")
        turns = len(request.messages) + (1 if request.system else 0) + (1 if request.prompt is not None else 0)
        return int(math.ceil(chars * endpoint.tokens_per_char * ESTIMATE_MARGIN)) + MESSAGE_OVERHEAD_TOKENS * turns

    def fit(self, task_input: i.TaskInput, route: Route, request: Request, *, last: bool = True) -> Request:
        """`request` if it fits the endpoint's window with room for its answer. Else, when nothing droppable is left
        in the input (`last`; see `droppable`): the proxy's reply drops the oldest whole conversation turns (never
        the system prompt nor the last user message), then any task takes less room for its answer (the maximum
        is a ceiling, not a need) down to MIN_ANSWER_TOKENS. Raises `PromptTooLarge` when it still cannot fit."""
        window = self.window(route.endpoint_name)
        asked = request.asks.num_ctx if request.asks is not None else None
        if asked and (not window or asked < window):  # the front end's num_ctx: this call's window
            window = asked
            request = msgspec.structs.replace(request, window=window)
        if not window:
            return request
        endpoint = route.endpoint
        if self.needed_tokens(endpoint, request) <= window - request.max_tokens:
            return request
        if not last:
            raise PromptTooLarge(self.too_large(route, request, window))
        if isinstance(task_input, i.Respond):
            messages = request.messages
            while len(messages) > 1 and self.needed_tokens(endpoint, request) > window - request.max_tokens:
                messages = messages[1:]
                while len(messages) > 1 and messages[0][0] != "user":
                    messages = messages[1:]
                request = msgspec.structs.replace(request, messages=messages)
            if self.needed_tokens(endpoint, request) <= window - request.max_tokens:
                return request
        room = window - self.needed_tokens(endpoint, request)
        if room >= min(MIN_ANSWER_TOKENS, request.max_tokens):
            return msgspec.structs.replace(request, max_tokens=room)
        raise PromptTooLarge(self.too_large(route, request, window))

    def too_large(self, route: Route, request: Request, window: int) -> str:
        e = route.endpoint
        source = "maxContextTokens" if e.max_context_tokens else "read from the server"
        return (f"endpoint {route.endpoint_name!r} ({e.api_type}{' ' + e.model if e.model else ''}): the prompt needs "
                f"~{self.needed_tokens(e, request):,} tokens with {request.max_tokens:,} for the answer; the window is "
                f"{window:,} ({source}). Raise the server's context size and llm.endpoints.{route.endpoint_name}."
                "maxContextTokens, or shorten the prompt")

    def repair_request(self, prepared: Prepared, answer: str, error: str) -> Request:
        template = "repair.prompt.txt" if SPECS[prepared.task].expects_json else "repair_text.prompt.txt"
        repair = render(self.templates.get(template), {"Error": error})
        request = prepared.request
        endpoint = self.config.endpoints[prepared.endpoint_name]
        window = self.window(prepared.endpoint_name)
        shown = answer or "(empty)"
        if window:  # the failed answer is shown only as far as it fits beside the prompt and the new answer's room
            base = msgspec.structs.replace(request, messages=request.messages + (("assistant", ""), ("user", repair)))
            room = window - request.max_tokens - self.needed_tokens(endpoint, base)
            limit = max(0, int(room / endpoint.tokens_per_char / ESTIMATE_MARGIN))
            if len(shown) > limit:
                shown = shown[: max(0, limit - 20)] + " … (cut)" if limit > 40 else "(too long to show)"
        messages = request.messages + (("assistant", shown), ("user", repair))
        return msgspec.structs.replace(request, messages=messages)

    # ------------------------------------------------------------------ running

    def run(self, task_input: i.TaskInput) -> Result:
        start = self.clock()
        if self._routed_offline(task_input):
            return self._offline(task_input)
        try:
            prepared = self.prepare(task_input)
        except PromptTooLarge as too_large:
            return self._too_large(task_input, too_large, start)
        try:
            completion, attempts = self.client(prepared.endpoint_name).create(prepared.request)
        except CallFailed as failed:
            return self.failure(task_input, prepared, failed.error, failed.attempts, start, transient=failed.transient)
        return self.finish(task_input, prepared, completion, attempts, start)

    def stream(self, task_input: i.TaskInput, on_text: Callable[[str], None]) -> Result:
        """`run` with the answer streamed from the model (`MessagesClient.stream`): each text delta goes to
        `on_text` as it arrives. An answer that needed a repair (empty) passes the repaired answer at once."""
        if SPECS[task_input.task].expects_json or self._routed_offline(task_input):
            return super().stream(task_input, on_text)  # a JSON answer means nothing until it is whole
        start = self.clock()
        try:
            prepared = self.prepare(task_input)
        except PromptTooLarge as too_large:
            return self._too_large(task_input, too_large, start)
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

    def _routed_offline(self, task_input: i.TaskInput) -> bool:
        return self.route(task_input.task, task_input.endpoint_name, task_input.preset).endpoint.api_type == "offline"

    def _offline(self, task_input: i.TaskInput) -> Result:
        from engram.providers.llm.offline.provider import OfflineTasks

        return OfflineTasks().run(task_input)

    def _too_large(self, task_input: i.TaskInput, too_large: "PromptTooLarge", start: float) -> Result:
        """A prompt that cannot fit: a chunk summary, observations or facts are made from the halves of the
        conversation, each within the window (no message is cut); anything else is a recorded, non-transient failure
        naming the endpoint and the numbers."""
        if isinstance(task_input, SPLITTABLE) and len(task_input.lines) > 1:
            half = len(task_input.lines) // 2
            parts = [self.run(msgspec.structs.replace(task_input, lines=task_input.lines[:half])),
                     self.run(msgspec.structs.replace(task_input, lines=task_input.lines[half:]))]
            failed = next((p for p in parts if p.failed), None)
            if failed is not None:
                return failed
            first, second = (p.llm for p in parts)
            llm = msgspec.structs.replace(
                second, input_tokens=first.input_tokens + second.input_tokens,
                output_tokens=first.output_tokens + second.output_tokens, attempts=first.attempts + second.attempts,
                cost_usd=round(first.cost_usd + second.cost_usd, 8),
                latency_ms=round((self.clock() - start) * 1000.0, 3),
                prompt_hash=digest(first.prompt_hash, second.prompt_hash),
                repaired=first.repaired or second.repaired,
            )
            if isinstance(task_input, i.SummarizeChunk):
                return Result(value="\n\n".join(str(p.value) for p in parts), llm=llm)
            return Result(value=tuple(parts[0].value) + tuple(parts[1].value), llm=llm)
        route = self.route(task_input.task, task_input.endpoint_name, task_input.preset)
        llm = LlmCall(provider=provider_of(route.endpoint), model=route.endpoint.model, task=task_input.task,
                      prompt_hash="", endpoint=route.endpoint_name, local=route.endpoint.is_local, attempts=0, error=str(too_large),
                      fallback=OFFLINE_MODEL, latency_ms=round((self.clock() - start) * 1000.0, 3))
        return Result(value=offline_compute(task_input), llm=llm)

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
        was_repaired = False
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
            was_repaired = True
            try:
                value = spec.decode(task_input, repaired.text)
            except AnswerInvalid as still:
                error = f"answer invalid after one repair: {still}"
                return self.failure(task_input, prepared, error, attempts, start, usage, batch_id)
        llm = self.provenance(prepared, usage, attempts, start, batch_id=batch_id)
        return Result(value=value, llm=msgspec.structs.replace(llm, repaired=was_repaired))

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
        endpoint = self.config.endpoints[prepared.endpoint_name]
        cache_read, cache_write = usage.total("cache_read_tokens"), usage.total("cache_write_tokens")
        first = usage.parts[0][0] if usage.parts else None
        return LlmCall(
            provider=provider_of(endpoint),
            model=model,
            task=prepared.task,
            prompt_hash=prepared.prompt_hash,
            endpoint=prepared.endpoint_name,
            input_tokens=usage.total("input_tokens") + cache_read + cache_write,
            output_tokens=usage.total("output_tokens"),
            latency_ms=round((self.clock() - start) * 1000.0, 3),
            cost_usd=usage.cost(model, self.config.prices, local=endpoint.is_local),
            error=error,
            fallback=OFFLINE_MODEL if error else None,
            attempts=attempts,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            batch_id=batch_id,
            structured=first.structured if first is not None else None,
            usage_estimated=any(c.usage_estimated for c, _ in usage.parts),
            local=endpoint.is_local,
        )


def droppable(task_input: i.TaskInput) -> i.TaskInput | None:
    """`task_input` with the next thing the guides drop to fit a window, None when nothing is left to drop:
    the proxy's reply drops memory passages lowest-ranked first (the last of `context`); chunk summaries and
    merges drop [Full_Memory_file] oldest first, then [Memory_file] oldest first, then [Chat_Summary]. The
    conversation chunk itself is never cut (a chunk that alone does not fit is summarised in halves)."""
    replace = msgspec.structs.replace
    if isinstance(task_input, i.Respond) and task_input.context:
        return replace(task_input, context=task_input.context[:-1])
    if isinstance(task_input, (i.SummarizeChunk, i.MergeSummary)) and task_input.all_memories:
        return replace(task_input, all_memories=task_input.all_memories[1:])
    if isinstance(task_input, i.SummarizeChunk) and task_input.recent_memories:
        return replace(task_input, recent_memories=task_input.recent_memories[1:])
    if isinstance(task_input, i.SummarizeChunk) and task_input.chat_summary:
        return replace(task_input, chat_summary="")
    return None


class PromptTooLarge(Exception):
    """A prompt that cannot fit its endpoint's window even after dropping what may be dropped."""

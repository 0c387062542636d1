"""`EndpointClient`: one configured HTTP endpoint of any apiType, called with engram's retry policy.

One client per endpoint, made once and shared in the process. It holds the endpoint's `httpx.Client` (base URL,
extra headers, the bearer key read from `apiKeyEnv`, the timeout), engram's retry policy (the same for every
type: 408/409/429/5xx/529, timeouts and refused connections are retried with jittered exponential backoff and
`retry-after` capped by `maxRetryAfterSeconds`), a concurrency limit that queues (`maxConcurrentRequests` slots:
flock'd files under `<home>/run/llm/` across the processes of a home, a semaphore within one), the context window
(`maxContextTokens`, or read from the server where it says), and the structured-output way (the strongest the
type supports, one step down, once, when the server refuses it — never retried as an outage).

Keys never appear in a log line or an error: errors carry the server's message and the endpoint's name only.
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

import httpx

from engram.config.llm import Endpoint
from engram.kernel.filelock import try_lock
from engram.providers.endpoints.adapters import ADAPTERS, RECORDED_WAY, Adapter, WireError, embed_answer, \
    embed_request, read_error
from engram.providers.endpoints.wire import CallFailed, Completion, Request

log = logging.getLogger(__name__)
R = TypeVar("R")

JITTER = 0.25
# Waiting for a free slot: polling interval bounds (seconds).
SLOT_POLL = (0.005, 0.1)


def retry_after_seconds(headers: Any) -> float | None:
    """The wait an error answer asks for: `retry-after-ms`, `retry-after` in seconds, or an HTTP date (read against
    the server's own `date` when it sent one)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        now = email.utils.parsedate_to_datetime(headers["date"]) if headers.get("date") else None
    except (TypeError, ValueError, IndexError):
        return None
    # Relative to the server's own clock when it sent one; a wall-clock read only as a last resort.
    base = now.timestamp() if now is not None else time.time()
    return max(0.0, when.timestamp() - base)


class _Slots:
    """At most `n` requests in flight: a semaphore in this process, flock'd slot files across processes."""

    _local: dict[tuple[str, str], threading.BoundedSemaphore] = {}
    _guard = threading.Lock()

    def __init__(self, key: str, n: int, directory: Path | None):
        self.n, self.directory, self.key = n, directory, key
        with _Slots._guard:
            self.sem = _Slots._local.setdefault((str(directory), key), threading.BoundedSemaphore(n))

    def acquire(self, deadline: float) -> int | None:
        if not self.sem.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise TimeoutError
        if self.directory is None:
            return None
        delay = SLOT_POLL[0]
        while True:
            for k in range(self.n):
                fd = try_lock(self.directory / f"{self.key}.{k}.lock")
                if fd is not None:
                    return fd
            if time.monotonic() > deadline:
                self.sem.release()
                raise TimeoutError
            time.sleep(delay)
            delay = min(delay * 2, SLOT_POLL[1])

    def release(self, fd: int | None) -> None:
        if fd is not None:
            os.close(fd)
        self.sem.release()


class EndpointClient:
    """One configured endpoint (any HTTP apiType): create, stream, embed, check."""

    def __init__(
        self,
        name: str,
        endpoint: Endpoint,
        *,
        env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        slots_dir: Path | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        env = os.environ if env is None else env
        self.name, self.endpoint = name, endpoint
        self.adapter: Adapter | None = ADAPTERS.get(endpoint.api_type)
        self._sleep = sleep
        self._rng = rng or random.Random()
        headers = dict(endpoint.headers)
        key_env = endpoint.key_env
        if key_env:
            key = env.get(key_env, "")
            if not key:
                raise CallFailed(f"endpoint {name!r}: environment variable {key_env} is not set", 0, kind="auth")
            headers["Authorization"] = f"Bearer {key}"
        self.http = httpx.Client(base_url=endpoint.url, headers=headers, timeout=endpoint.timeout_seconds,
                                 transport=transport)
        # Across processes when the home's slots directory is given (EndpointTasks of a home), else in this one.
        self.slots = _Slots(name, endpoint.concurrency, slots_dir)
        # The structured-output ways left to try (the configured one alone, or the type's ladder).
        ways = self.adapter.ways if self.adapter else ("none",)
        configured = endpoint.structured_output
        self._ways: list[str] = list(ways) if configured == "auto" else [configured]
        self._window: int | None = endpoint.max_context_tokens
        self._window_source = "maxContextTokens" if self._window else None
        self._discovered = self._window is not None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ facts

    def who(self) -> str:
        e = self.endpoint
        return f"endpoint {self.name!r} ({e.api_type}{' ' + e.model if e.model else ''})"

    @property
    def way(self) -> str:
        return self._ways[0]

    def window(self) -> tuple[int | None, str | None]:
        """The context window in tokens and where it came from (configured, or read from the server once)."""
        with self._lock:
            if not self._discovered:
                self._discovered = True
                try:
                    self._window, self._window_source = self._discover_window()
                except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
                    log.info("%s: could not read the context window (%s)", self.who(), type(exc).__name__)
                if self._window:
                    log.info("%s: context window %d tokens (%s)", self.who(), self._window, self._window_source)
        return self._window, self._window_source

    def _discover_window(self) -> tuple[int | None, str | None]:
        t = self.endpoint.api_type
        if t.startswith("ollama"):
            r = self.http.post("/api/show", json={"model": self.endpoint.model})
            if r.status_code != 200:
                return None, None
            data = r.json()
            for line in (data.get("parameters") or "").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == "num_ctx":
                    return int(parts[1]), "Modelfile num_ctx (/api/show)"
            trained = [v for k, v in (data.get("model_info") or {}).items() if k.endswith(".context_length")]
            if trained:
                # Ollama's runtime default is smaller than the trained window; engram sends num_ctx = this.
                return min(int(trained[0]), 4096), "/api/show context_length, capped at Ollama's default 4096"
            return None, None
        if t == "koboldCppGenerate":
            r = self.http.get("/api/extra/true_max_context_length")
            return (int(r.json()["value"]), "/api/extra/true_max_context_length") if r.status_code == 200 else (None, None)
        if t.startswith("openAI"):
            r = self.http.get("/props")  # llama.cpp's llama-server
            if r.status_code == 200:
                return int(r.json()["default_generation_settings"]["n_ctx"]), "/props n_ctx"
            r = self.http.get("/v1/models")  # vLLM
            if r.status_code == 200:
                row = (r.json().get("data") or [{}])[0]
                if row.get("max_model_len"):
                    return int(row["max_model_len"]), "/v1/models max_model_len"
        return None, None

    # ------------------------------------------------------------------ retries

    def backoff(self, attempt: int) -> float:
        e = self.endpoint
        delay = min(e.retry_initial_delay_seconds * (2 ** (attempt - 1)), e.retry_max_delay_seconds)
        return delay * (1.0 - JITTER * self._rng.random())

    def with_retries(self, call: Callable[[], R], retryable: Callable[[], bool] = lambda: True) -> tuple[R, int]:
        """`call()` retried per the endpoint; its value and the attempts it took. No retry after a streamed
        answer started reaching the caller (`retryable()` False)."""
        attempts = 0
        while True:
            attempts += 1
            wait: float | None = None
            try:
                return call(), attempts
            except WireError as exc:
                error = f"{self.who()}: {exc.message}"
                if not retryable():
                    raise CallFailed(f"{error} (the answer had started streaming)", attempts, transient=True) from None
                if not exc.transient:
                    raise CallFailed(error + _fix(exc.kind, self), attempts, kind=exc.kind) from None
                wait = exc.retry_after
                if wait is not None and wait > self.endpoint.max_retry_after_seconds:
                    raise CallFailed(f"{error}: retry-after {wait:g}s exceeds maxRetryAfterSeconds "
                                     f"({self.endpoint.max_retry_after_seconds:g}s)", attempts, transient=True) from None
            except httpx.TimeoutException:
                error = f"{self.who()}: timeout after {self.endpoint.timeout_seconds:g}s"
            except (httpx.TransportError, OSError) as exc:
                error = (f"{self.who()}: cannot reach {self.endpoint.url} ({type(exc).__name__}) — is the server "
                         f"running? check llm.endpoints.{self.name}.baseUrl")
            if not retryable():
                raise CallFailed(f"{error} (the answer had started streaming)", attempts, transient=True)
            if attempts > self.endpoint.max_retries:
                raise CallFailed(f"{error} (gave up after {attempts} attempts)", attempts, transient=True)
            self._sleep(wait if wait is not None else self.backoff(attempts))

    def _slot(self):
        client = self

        class _Held:
            def __enter__(self):
                try:
                    self.fd = client.slots.acquire(time.monotonic() + client.endpoint.timeout_seconds)
                except TimeoutError:
                    raise CallFailed(f"{client.who()}: no free slot of {client.endpoint.concurrency} within "
                                     f"{client.endpoint.timeout_seconds:g}s (maxConcurrentRequests)", 0,
                                     transient=True) from None

            def __exit__(self, *exc):
                client.slots.release(self.fd)

        return _Held()

    # ------------------------------------------------------------------ calls

    def _post(self, path: str, body: dict) -> Any:
        r = self.http.post(path, json=body)
        if r.status_code != 200:
            raise self._error(r, path)
        return r.json()

    def _error(self, r: httpx.Response, path: str) -> WireError:
        raw = r.text
        try:
            data = r.json()
        except ValueError:
            data = None
        error = read_error(r.status_code, data, raw, path)
        error.retry_after = retry_after_seconds(r.headers)
        return error

    def _structured_ladder(self, request: Request, attempt: Callable[[str], R]) -> R:
        """`attempt(way)`, stepping down the structured-output ladder once per refusal (not retried as an outage)."""
        while True:
            way = self.way if request.structured is not None else "none"
            try:
                return attempt(way)
            except CallFailed as failed:
                if failed.kind != "refused_structured" or request.structured is None or len(self._ways) < 2:
                    raise
                with self._lock:
                    if self._ways and self._ways[0] == way:
                        self._ways.pop(0)
                log.warning("%s refused structured output as %s; using %s from now on", self.who(), way, self.way)

    def create(self, request: Request) -> tuple[Completion, int]:
        """One call; raises CallFailed when every allowed attempt failed."""
        adapter = self._need_adapter()
        window = request.window or self.window()[0]

        def attempt(way: str) -> tuple[Completion, int]:
            body = adapter.body(request, self.endpoint, way, False, window)
            path = adapter.path(False)

            def call() -> Completion:
                with self._slot():
                    data = self._post(path, body)
                c = adapter.answer(data)
                return _with(c, request, way)

            return self.with_retries(call)

        return self._structured_ladder(request, attempt)

    def stream(self, request: Request, on_text: Callable[[str], None]) -> tuple[Completion, int]:
        """One call streamed: each text delta goes to `on_text` as it arrives. Retried until the first delta; a
        failure after it is final. An exception raised by `on_text` ends the call and propagates."""
        adapter = self._need_adapter()
        window = request.window or self.window()[0]
        started = False

        def attempt(way: str) -> tuple[Completion, int]:
            body = adapter.body(request, self.endpoint, way, True, window)
            path = adapter.path(True)

            def call() -> Completion:
                nonlocal started
                parts: list[str] = []
                final = None
                with self._slot():
                    with self.http.stream("POST", path, json=body) as r:
                        if r.status_code != 200:
                            r.read()
                            raise self._error(r, path)
                        for event in adapter.events(r.iter_lines()):
                            if event.done:
                                final = event
                                break
                            started = True
                            parts.append(event.text)
                            on_text(event.text)
                if final is None:  # every adapter's `events` ends in its done event or raises; a new one might not
                    raise WireError("the stream ended without its final event", transient=True, kind="server")
                text = "".join(parts)
                est = final.input_tokens is None
                return _with(Completion(
                    text=text,
                    input_tokens=final.input_tokens if final.input_tokens is not None else _estimate(request, self),
                    output_tokens=final.output_tokens if final.output_tokens is not None else
                    max(1, round(len(text) * self.endpoint.tokens_per_char)) if text else 0,
                    stop_reason=final.finish_reason, model=final.model, usage_estimated=est,
                ), request, way)

            return self.with_retries(call, retryable=lambda: not started)

        return self._structured_ladder(request, attempt)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors of `texts` from an openAIEmbeddings / ollamaEmbeddings endpoint, as the server sends them.
        No retries (callers degrade to keyword search); CallFailed on any error."""
        if not texts:
            return []
        path, body = embed_request(self.endpoint.api_type, self.endpoint.model, texts)
        try:
            with self._slot():
                data = self._post(path, body)
            return embed_answer(self.endpoint.api_type, data)
        except WireError as exc:
            raise CallFailed(f"{self.who()}: {exc.message}{_fix(exc.kind, self)}", 1, transient=exc.transient,
                             kind=exc.kind) from None
        except httpx.TimeoutException:
            raise CallFailed(f"{self.who()}: timeout after {self.endpoint.timeout_seconds:g}s", 1,
                             transient=True) from None
        except (httpx.TransportError, OSError) as exc:
            raise CallFailed(f"{self.who()}: connection error at {self.endpoint.url}: {type(exc).__name__}", 1,
                             transient=True) from None
        except (KeyError, TypeError, ValueError) as exc:
            raise CallFailed(f"{self.who()}: unexpected embedding answer ({type(exc).__name__})", 1) from None

    def served_model(self) -> str | None:
        """The model the server says it serves (for `engram llm check`), when it says."""
        adapter = self.adapter
        models = adapter.models_path() if adapter is not None else None
        if adapter is None or models is None:
            return None
        r = self.http.get(models)
        if r.status_code != 200:
            raise self._error(r, models)
        data = r.json()
        if self.endpoint.api_type.startswith("ollama"):
            names = [m.get("name") or m.get("model") for m in data.get("models", [])]
            want = self.endpoint.model
            hit = [n for n in names if n in (want, f"{want}:latest")]
            if not hit:
                raise WireError(f"model {want!r} not found", transient=False, kind="model_missing", status=404)
            return hit[0]
        return adapter.model_of(data)

    def _need_adapter(self) -> Adapter:
        if self.adapter is None:
            raise CallFailed(f"{self.who()}: an endpoint of type {self.endpoint.api_type} does not answer prompts", 0)
        return self.adapter

    def close(self) -> None:
        self.http.close()


def _with(c: Completion, request: Request, way: str) -> Completion:
    import msgspec

    structured = RECORDED_WAY.get(way) if request.structured is not None else None
    return msgspec.structs.replace(c, structured=structured)


def _estimate(request: Request, client: EndpointClient) -> int:
    chars = len(request.system) + sum(len(t) for _, t in request.messages) + len(request.prompt or "")
    return max(1, round(chars * client.endpoint.tokens_per_char))


def _fix(kind: str | None, client: EndpointClient) -> str:
    """What to do about an error of this kind (the Wunderland tool-failure lesson: say what to fix)."""
    e = client.endpoint
    if kind == "model_missing":
        if e.api_type.startswith("ollama"):
            return f" — run `ollama pull {e.model}` on the server, or fix llm.endpoints.{client.name}.model"
        return f" — check llm.endpoints.{client.name}.model against the models the server lists"
    if kind == "auth":
        return f" — check the key in {e.key_env or '(no apiKeyEnv set)'} for llm.endpoints.{client.name}"
    if kind == "not_found":
        return f" — check llm.endpoints.{client.name}.baseUrl ({e.url}) and apiType ({e.api_type})"
    if kind == "context":
        return f" — the prompt does not fit the server's window: set llm.endpoints.{client.name}.maxContextTokens"
    return ""

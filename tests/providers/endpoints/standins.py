"""Stand-ins for servers that cannot run here: Ollama's native API and KoboldCpp.

Both are STAND-INS, not the real servers. They follow the documented wire formats (Ollama: docs/api.md,
api/types.go and server/routes.go; KoboldCpp: koboldcpp.py's /api/v1 and /api/extra routes) and are strict:
they refuse what the real servers refuse, with the real status codes and error shapes, and they count what the
real servers would do silently (Ollama dropping the oldest messages past `num_ctx`, KoboldCpp cutting a prompt
from the front), so that a test can assert engram never relies on it. The real llama.cpp server is tested
for real (`llama_server.py`).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

OLLAMA_OPTION_TYPES = {"num_ctx": int, "num_predict": int, "seed": int, "top_k": int, "temperature": float,
                       "top_p": float, "min_p": float, "repeat_penalty": float, "stop": list, "num_keep": int}


def pieces(text: str) -> list[str]:
    """The text word by word, spaces kept: what a stream sends."""
    words = text.split(" ")
    return [words[0]] + [" " + w for w in words[1:]]


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


class _StandIn:
    """A ThreadingHTTPServer on 127.0.0.1:0 in a daemon thread, with a script of answers."""

    def __init__(self) -> None:
        self.script: deque[str] = deque()
        self.answer: Callable[[dict], str] = lambda body: "stand-in answer"
        self.requests: list[tuple[str, dict]] = []  # (path, body) of every POST
        self.silently_truncated = 0  # what the real server would have cut without saying so
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def then(self, *texts: str):
        self.script.extend(texts)
        return self

    def next_text(self, body: dict) -> str:
        with self._lock:
            return self.script.popleft() if self.script else self.answer(body)

    def posts(self, path: str) -> list[dict]:
        return [body for p, body in self.requests if p == path]

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def send(self, status: int, body: Any, content_type: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def begin_stream(self, content_type: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

            def chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def end_stream(self) -> None:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def do_GET(self):
                standin.get(self)

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                standin.post(self, raw)

        return Handler


class OllamaStandIn(_StandIn):
    """Stand-in for Ollama's native API (`/api/chat`, `/api/generate`, `/api/show`, `/api/tags`, `/api/version`,
    `/api/embed`), following Ollama's docs/api.md and server/routes.go; strict where Ollama is."""

    def __init__(self, models: dict[str, int] | None = None, *, old_not_found_text: bool = False) -> None:
        super().__init__()
        # Model name -> trained context length (model_info "llama.context_length").
        self.models = models or {"llama3.1:8b": 131072}
        self.modelfile_num_ctx: dict[str, int] = {}
        self.default_num_ctx = 4096  # OLLAMA_CONTEXT_LENGTH
        self.old_not_found_text = old_not_found_text
        self.ignored_options: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = 0.0
        # `/api/embed` made deliberately slow, as a big model on a small machine is: this long per text of a request.
        self.embed_seconds_per_text = 0.0
        self.embed_down = False  # `/api/embed` answers 500 as an Ollama whose runner died does

    def _model(self, handler, body: dict) -> str | None:
        name = body.get("model")
        if not name:
            handler.send(400, {"error": "model is required"})
            return None
        known = {*self.models, *(m.removesuffix(":latest") for m in self.models)}
        if name not in known:
            text = f'model "{name}" not found, try pulling it first' if self.old_not_found_text else \
                f"model '{name}' not found"
            handler.send(404, {"error": text})
            return None
        return name

    def get(self, handler) -> None:
        if handler.path == "/api/version":
            return handler.send(200, {"version": "0.12.0"})
        if handler.path == "/api/tags":
            return handler.send(200, {"models": [
                {"name": m, "model": m, "modified_at": "2026-11-01T00:00:00Z", "size": 1, "digest": "0" * 64,
                 "details": {"format": "gguf", "family": "llama"}} for m in self.models]})
        handler.send(404, b"404 page not found", "text/plain")

    def post(self, handler, raw: bytes) -> None:
        path = handler.path
        if not raw:
            return handler.send(400, {"error": "missing request body"})
        try:
            body = json.loads(raw)
        except ValueError as exc:
            return handler.send(400, {"error": f"invalid character in JSON: {exc}"})
        with self._lock:
            self.requests.append((path, body))
        if path == "/api/show":
            name = self._model(handler, body)
            if name is None:
                return
            params = f"num_ctx {self.modelfile_num_ctx[name]}" if name in self.modelfile_num_ctx else ""
            return handler.send(200, {"parameters": params, "model_info": {"general.architecture": "llama",
                                                                           "llama.context_length": self.models[name]}})
        if path == "/api/embed":
            if self._model(handler, body) is None:
                return
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            if not isinstance(texts, list) or not texts:
                return handler.send(400, {"error": "input is required"})
            time.sleep(self.embed_seconds_per_text * len(texts))
            if self.embed_down:  # also a request already under way when the runner died
                return handler.send(500, {"error": "llama runner process has terminated: exit status 2"})
            vectors = [[float(len(t)), 1.0, float(sum(map(ord, t)) % 7)] for t in texts]
            return handler.send(200, {"model": body["model"], "embeddings": vectors, "prompt_eval_count": len(texts)})
        if path not in ("/api/chat", "/api/generate"):
            return handler.send(404, b"404 page not found", "text/plain")
        name = self._model(handler, body)
        if name is None:
            return
        options = body.get("options") or {}
        for key, value in options.items():
            want = OLLAMA_OPTION_TYPES.get(key)
            if want is None:
                self.ignored_options.append(key)  # Ollama logs "invalid option provided" and ignores it
                continue
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value) if want is list else \
                isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok:
                return handler.send(500, {"error": f'option "{key}" must be of type {want.__name__}'})
        fmt = body.get("format")
        if fmt is not None and fmt != "json" and not isinstance(fmt, dict):
            return handler.send(400, {"error": "invalid format"})
        keep_alive = body.get("keep_alive")
        if keep_alive is not None and not isinstance(keep_alive, (int, float)) and not (
                isinstance(keep_alive, str) and re.fullmatch(r"-?\d+(\.\d+)?(ns|us|ms|s|m|h)?", keep_alive)):
            return handler.send(400, {"error": f'time: invalid duration "{keep_alive}"'})
        images = [image for m in body.get("messages") or [] for image in m.get("images") or []]
        images += body.get("images") or []
        for image in images:  # Ollama decodes each one: base64 strings only
            try:
                base64.b64decode(image, validate=True)
            except (ValueError, TypeError):
                return handler.send(400, {"error": "illegal base64 data at input byte 0"})
        if path == "/api/chat":
            messages = body.get("messages")
            if not isinstance(messages, list) or any(
                    m.get("role") not in ("system", "user", "assistant", "tool") or not isinstance(m.get("content"), str)
                    for m in messages):
                return handler.send(400, {"error": "invalid message"})
            prompt_chars = sum(len(m["content"]) for m in messages)
        else:
            if not isinstance(body.get("prompt", ""), str):
                return handler.send(400, {"error": "invalid prompt"})
            prompt_chars = len(body.get("prompt", "")) + len(body.get("system", ""))
        window = int(options.get("num_ctx") or self.modelfile_num_ctx.get(name) or self.default_num_ctx)
        prompt_tokens = prompt_chars // 4 + 1
        if prompt_tokens > window:
            if body.get("truncate") is False:
                return handler.send(400, {"error": "the input length exceeds the context length"})
            self.silently_truncated += 1
        text = self.next_text(body)
        if isinstance(fmt, dict):
            json.loads(text)  # a schema-constrained answer is JSON: a test script must supply JSON
        key = "message" if path == "/api/chat" else "response"

        def piece(t: str) -> dict:
            return {"role": "assistant", "content": t} if key == "message" else t

        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
            final = {"model": name, "created_at": "2026-12-03T12:00:00.000000Z", key: piece(""), "done": True,
                     "done_reason": "stop", "total_duration": _ns(0.2), "load_duration": _ns(0.01),
                     "prompt_eval_count": prompt_tokens, "prompt_eval_duration": _ns(0.05),
                     "eval_count": max(1, len(text) // 4), "eval_duration": _ns(0.1)}
            if body.get("stream", True) is False:
                return handler.send(200, {**final, key: piece(text)})
            handler.begin_stream("application/x-ndjson")
            for part in pieces(text):
                handler.chunk((json.dumps({"model": name, "created_at": "2026-12-03T12:00:00Z", key: piece(part),
                                           "done": False}) + "\n").encode())
            handler.chunk((json.dumps(final) + "\n").encode())
            handler.end_stream()
        finally:
            with self._lock:
                self.in_flight -= 1


class KoboldCppStandIn(_StandIn):
    """Stand-in for KoboldCpp's API (`/api/v1/generate`, `/api/extra/generate/stream`, `/api/v1/model`,
    `/api/extra/true_max_context_length`), following koboldcpp.py; strict where KoboldCpp is: one generation at a
    time with a queue of `multiuser` waiting requests and then 503 busy, a window it clamps and cuts silently
    (counted here), grammars that must parse (checked with llama.cpp's own GBNF parser when given `vocab`)."""

    def __init__(self, *, context: int = 4096, multiuser: int = 6, grammar_check: Callable[[str], bool] | None = None,
                 password: str | None = None, delay: float = 0.0) -> None:
        super().__init__()
        self.context, self.multiuser, self.password, self.delay = context, multiuser, password, delay
        self.grammar_check = grammar_check
        self._generating = threading.Lock()
        self.waiting = 0
        self.busy_refusals = 0
        self.overlaps = 0
        self.in_flight = 0

    def _auth(self, handler) -> bool:
        if self.password and handler.headers.get("Authorization") != f"Bearer {self.password}":
            handler.send(401, {"detail": {"error": "Unauthorized", "msg": "Authentication key is missing or invalid.",
                                          "type": "unauthorized"}})
            return False
        return True

    def get(self, handler) -> None:
        if not self._auth(handler):
            return
        if handler.path == "/api/v1/model":
            return handler.send(200, {"result": "koboldcpp/tiny-standin"})
        if handler.path == "/api/extra/true_max_context_length":
            return handler.send(200, {"value": self.context})
        if handler.path == "/api/extra/version":
            return handler.send(200, {"result": "KoboldCpp", "version": "1.76"})
        handler.send(404, {"detail": "Not Found"})

    def post(self, handler, raw: bytes) -> None:
        if not self._auth(handler):
            return
        try:
            body = json.loads(raw)
            assert isinstance(body, dict)
        except (ValueError, AssertionError):
            return handler.send(500, {"detail": {"msg": "Error parsing input.", "type": "bad_input"}})
        path = handler.path
        with self._lock:
            self.requests.append((path, body))
        if path not in ("/api/v1/generate", "/api/extra/generate/stream"):
            return handler.send(404, {"detail": "Not Found"})
        if not isinstance(body.get("prompt"), str):
            return handler.send(500, {"detail": {"msg": "Error parsing input.", "type": "bad_input"}})
        stop = body.get("stop_sequence", [])
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            return handler.send(500, {"detail": {"msg": "Error parsing input.", "type": "bad_input"}})
        grammar = body.get("grammar")
        if grammar and self.grammar_check is not None and not self.grammar_check(grammar):
            return handler.send(500, {"detail": {"msg": "Invalid grammar.", "type": "bad_input"}})
        window = int(body.get("max_context_length") or 2048)
        if window > self.context:
            self.silently_truncated += 1  # clamped with a console warning only
            window = self.context
        if len(body["prompt"]) // 4 + int(body.get("max_length") or 100) > window:
            self.silently_truncated += 1  # the prompt is cut from the front
        with self._lock:
            if self._generating.locked() and self.waiting >= self.multiuser:
                self.busy_refusals += 1
                return handler.send(503, {"detail": {"msg": "Server is busy; please try again later.",
                                                     "type": "service_unavailable"}})
            self.waiting += 1
        with self._generating:
            with self._lock:
                self.waiting -= 1
                self.in_flight += 1
                if self.in_flight > 1:
                    self.overlaps += 1
            try:
                time.sleep(self.delay)
                text = self.next_text(body)
                if grammar:
                    json.loads(text)  # a grammar-constrained answer is JSON: a test script must supply JSON
                if path == "/api/v1/generate":
                    return handler.send(200, {"results": [{"text": text, "finish_reason": "stop",
                                                           "prompt_tokens": len(body["prompt"]) // 4 + 1,
                                                           "completion_tokens": max(1, len(text) // 4)}]})
                handler.begin_stream("text/event-stream")
                for part in pieces(text):
                    handler.chunk(f"event: message\ndata: {json.dumps({'token': part, 'finish_reason': None})}\n\n"
                                  .encode())
                handler.chunk(f"event: message\ndata: {json.dumps({'token': '', 'finish_reason': 'stop'})}\n\n"
                              .encode())
                handler.end_stream()
            finally:
                with self._lock:
                    self.in_flight -= 1


class LMStudioStandIn(_StandIn):
    """Stand-in for LM Studio's OpenAI-compatible server (`/v1/chat/completions`, `/v1/models`): takes
    `response_format` `json_schema` (its `json_schema.schema`) and refuses `json_object` with 400
    `{"error": "'response_format.type' must be 'json_schema' or 'text'"}`, as LM Studio does; streams SSE chunks
    and, with `stream_options.include_usage`, a last chunk with `usage` and no choices."""

    def get(self, handler) -> None:
        if handler.path == "/v1/models":
            return handler.send(200, {"object": "list", "data": [{"id": "qwen2.5-7b-instruct", "object": "model"}]})
        handler.send(404, {"error": "Unexpected endpoint or method."})

    def post(self, handler, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            return handler.send(400, {"error": "Invalid JSON"})
        with self._lock:
            self.requests.append((handler.path, body))
        if handler.path != "/v1/chat/completions":
            return handler.send(404, {"error": "Unexpected endpoint or method."})
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return handler.send(400, {"error": "'messages' field is required"})
        fmt = body.get("response_format")
        if fmt is not None:
            if fmt.get("type") not in ("json_schema", "text"):
                return handler.send(400, {"error": "'response_format.type' must be 'json_schema' or 'text'"})
            if fmt["type"] == "json_schema" and not isinstance((fmt.get("json_schema") or {}).get("schema"), dict):
                return handler.send(400, {"error": "'response_format.json_schema.schema' is required"})
        text = self.next_text(body)
        if fmt is not None and fmt["type"] == "json_schema":
            json.loads(text)  # a schema-constrained answer is JSON: a test script must supply JSON
        usage = {"prompt_tokens": 42, "completion_tokens": max(1, len(text) // 4), "total_tokens": 0}
        model = body.get("model", "qwen2.5-7b-instruct")
        if not body.get("stream"):
            return handler.send(200, {"id": "chatcmpl-1", "object": "chat.completion", "model": model, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": usage})
        handler.begin_stream("text/event-stream")

        def event(obj) -> None:
            handler.chunk(f"data: {json.dumps(obj)}\n\n".encode())

        event({"id": "c", "object": "chat.completion.chunk", "model": model,
               "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
        for part in pieces(text):
            event({"id": "c", "object": "chat.completion.chunk", "model": model,
                   "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]})
        event({"id": "c", "object": "chat.completion.chunk", "model": model,
               "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            event({"id": "c", "object": "chat.completion.chunk", "model": model, "choices": [], "usage": usage})
        handler.chunk(b"data: [DONE]\n\n")
        handler.end_stream()

"""A local stand-in for the Anthropic Messages API (used by the LLM tests' fixtures and by any test
that runs a real anthropic provider, e.g. the discussion Summarizer's routing tests).

The stand-in is a real HTTP server on 127.0.0.1; the real `anthropic` client talks to it through
`base_url`. It answers POST /v1/messages from a script of replies (then from `answer`, a function
of the request body), and implements the Message Batches endpoints: create, retrieve (in_progress
for `polls_before_end` polls, then ended), and results as JSON lines in reverse order, so that
mapping by custom_id is exercised. No test reaches the internet.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass
class Reply:
    status: int = 200
    text: str | None = None  # answer text (status 200); None: ask `answer`
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds to wait before answering (timeouts)
    usage: dict[str, int] | None = None
    fail_after: int | None = None  # a streamed answer: an `error` event (overloaded) after this many text deltas


def message(text: str, model: str, usage: dict[str, int] | None = None) -> dict:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 100, "output_tokens": 20},
    }


class FakeMessagesApi:
    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.answer: Callable[[dict], str] = lambda body: "fake summary"
        self.requests: list[dict] = []  # bodies of POST /v1/messages, in arrival order
        self.batches: dict[str, dict] = {}
        self.batch_creates = 0
        self.polls_before_end = 1
        self.errored_custom_ids: set[str] = set()
        # A streamed answer (`"stream": true`) is sent word by word; after_delta(n) is called once the n-th text delta
        # has left (e.g. to wait until the client has seen it before sending more).
        self.after_delta: Callable[[int], None] = lambda n: None
        self.streamed_deltas = 0  # text deltas sent, over every streamed answer
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeMessagesApi":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def then(self, status: int = 200, **reply) -> "FakeMessagesApi":
        """Queue one reply for the next POST /v1/messages (chainable)."""
        self.script.append(Reply(status=status, **reply))
        return self

    # ------------------------------------------------------------------ batches

    def _batch_json(self, batch_id: str) -> dict:
        b = self.batches[batch_id]
        ended = b["polls"] >= self.polls_before_end
        n = len(b["requests"])
        errored = sum(1 for r in b["requests"] if r["custom_id"] in self.errored_custom_ids)
        return {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": 0 if ended else n,
                "succeeded": n - errored if ended else 0,
                "errored": errored if ended else 0,
                "canceled": 0,
                "expired": 0,
            },
            "created_at": "2026-11-30T12:00:00Z",
            "expires_at": "2026-12-01T12:00:00Z",
            "ended_at": "2026-11-30T12:05:00Z" if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{batch_id}/results" if ended else None,
        }

    def _results_jsonl(self, batch_id: str) -> str:
        lines = []
        for r in reversed(self.batches[batch_id]["requests"]):
            cid = r["custom_id"]
            if cid in self.errored_custom_ids:
                result = {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": "invalid_request_error", "message": "bad request"}},
                }
            else:
                text = self.answer(r["params"])
                result = {"type": "succeeded", "message": message(text, r["params"]["model"])}
            lines.append(json.dumps({"custom_id": cid, "result": result}))
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------ HTTP

    def _handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _send(self, status: int, body: str, headers: dict[str, str] | None = None, ctype="application/json"):
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", ctype)
                    self.send_header("content-length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _body(self) -> dict:
                n = int(self.headers.get("content-length") or 0)
                return json.loads(self.rfile.read(n) or b"{}")

            def _event(self, kind: str, data: dict) -> None:
                self.wfile.write(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

            def _stream(self, text: str, model: str, reply: Reply) -> None:
                """The Messages API's server-sent events for `text`, one text delta per word."""
                self.close_connection = True
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    start = message("", model, reply.usage)
                    start["content"], start["stop_reason"] = [], None
                    self._event("message_start", {"type": "message_start", "message": start})
                    self._event("content_block_start", {"type": "content_block_start", "index": 0,
                                                        "content_block": {"type": "text", "text": ""}})
                    words = re.findall(r"\S+\s*|\s+", text)
                    for n, word in enumerate(words, start=1):
                        if reply.fail_after is not None and n > reply.fail_after:
                            self._event("error", {"type": "error", "error": {"type": "overloaded_error",
                                                                             "message": "Overloaded"}})
                            return
                        self._event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                            "delta": {"type": "text_delta", "text": word}})
                        with api._lock:
                            api.streamed_deltas += 1
                        api.after_delta(n)
                    self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
                    self._event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                  "stop_sequence": None}, "usage": {"output_tokens": len(words)}})
                    self._event("message_stop", {"type": "message_stop"})
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading

            def do_POST(self) -> None:
                body = self._body()
                if self.path == "/v1/messages":
                    with api._lock:
                        api.requests.append(body)
                        reply = api.script.popleft() if api.script else Reply()
                    if reply.delay:
                        time.sleep(reply.delay)
                    if reply.status != 200:
                        err = {"type": ERROR_TYPES.get(reply.status, "api_error"), "message": f"fake {reply.status}"}
                        self._send(reply.status, json.dumps({"type": "error", "error": err}), reply.headers)
                        return
                    text = reply.text if reply.text is not None else api.answer(body)
                    if body.get("stream"):
                        self._stream(text, body["model"], reply)
                        return
                    self._send(200, json.dumps(message(text, body["model"], reply.usage)), reply.headers)
                elif self.path == "/v1/messages/batches":
                    with api._lock:
                        api.batch_creates += 1
                        batch_id = f"msgbatch_{api.batch_creates:04d}"
                        api.batches[batch_id] = {"requests": body["requests"], "polls": 0}
                    self._send(200, json.dumps(api._batch_json(batch_id)))
                else:
                    self._send(404, json.dumps({"type": "error", "error": {"type": "not_found_error", "message": self.path}}))

            def do_GET(self) -> None:
                parts = self.path.split("?")[0].strip("/").split("/")
                if parts[:3] == ["v1", "messages", "batches"] and len(parts) >= 4 and parts[3] in api.batches:
                    batch_id = parts[3]
                    if len(parts) == 5 and parts[4] == "results":
                        self._send(200, api._results_jsonl(batch_id), ctype="application/binary")
                        return
                    with api._lock:
                        api.batches[batch_id]["polls"] += 1
                    self._send(200, json.dumps(api._batch_json(batch_id)))
                    return
                self._send(404, json.dumps({"type": "error", "error": {"type": "not_found_error", "message": self.path}}))

        return Handler


# Tiny delays so that retries cost milliseconds; set through configuration, as a user would.
FAST_RETRIES = dict(retry_initial_delay_seconds=0.001, retry_max_delay_seconds=0.005, max_retries=3)

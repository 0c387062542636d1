"""Outgoing webhooks: memory created, updated and forgotten reach the configured URL, signed with its secret, retried
with backoff when the receiver fails, and never hold up ingest."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from engram.api import types as t

AGENT, OTHER = "ada", "bob"
SECRET = "a-webhook-secret-of-some-length"


class StandInReceiver:
    """A stand-in for a user's webhook endpoint (an HTTP server on loopback): it records every POST, and answers
    500 to the first `fail_first` of them."""

    def __init__(self, fail_first: int = 0):
        self.posts: list[tuple[dict, bytes]] = []
        self.fail_first = fail_first
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.posts.append((dict(self.headers), body))
                status = 500 if len(outer.posts) <= outer.fail_first else 204
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[dict]:
        """Each delivery once (a retried one comes again under the same X-Engram-Delivery), as a receiver keeps them."""
        seen, out = set(), []
        for headers, body in self.posts:
            if headers["X-Engram-Delivery"] not in seen:
                seen.add(headers["X-Engram-Delivery"])
                out.append(json.loads(body))
        return out

    def close(self):
        self.server.shutdown()


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def hooked(tmp_path, monkeypatch):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    receiver = StandInReceiver(fail_first=2)
    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"embedder": {"name": "hashing"}, "webhooks": [
        {"url": receiver.url, "secret": SECRET, "agents": [AGENT], "backoffSeconds": 0.05}]}))
    engram = Engram(InProcessRuntime(load_service_config(home)).start())
    engram.start_webhooks()
    try:
        yield engram, receiver
    finally:
        engram.close()
        receiver.close()


def test_memory_changes_reach_the_webhook_signed_and_retried_and_other_agents_stay_out(hooked):
    mem, receiver = hooked
    for agent in (AGENT, OTHER):
        mem.append_messages(agent, f"{agent}-talk", t.AppendRequest(messages=[
            t.Message(role="user", content=f"My sister Ines is vegetarian, {agent} says, and loves Lisbon.")]))
    mem.wait_idle()
    assert wait_for(lambda: any(e["event"] == "memory.created" for e in receiver.events()))
    trace_id = next(e["memory_id"] for e in receiver.events() if e["event"] == "memory.created" and e["kind"] == "trace")
    mem.edit_memory(AGENT, "trace", trace_id, t.MemoryEdit(content="Ines eats fish now."))
    job = mem.delete_memory(AGENT, "trace", trace_id, t.ForgetRequest())
    assert mem.jobs.wait(job.id, timeout=300).state == "succeeded"
    assert wait_for(lambda: any(e["event"] == "memory.forgotten" for e in receiver.events()))

    events = receiver.events()
    assert [e["event"] for e in events if e.get("memory_id") == trace_id] == [
        "memory.created", "memory.updated", "memory.forgotten"]
    assert next(e for e in events if e["event"] == "memory.updated")["content"] == "Ines eats fish now."
    assert {e["agent"] for e in events} == {AGENT}  # the webhook names only its agents
    assert not any(b"bob" in body for _, body in receiver.posts)
    for headers, body in receiver.posts:
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers["X-Engram-Signature"] == expected
    # The first two POSTs failed (500) and were retried: the first delivery came three times under one id.
    first = receiver.posts[0][0]["X-Engram-Delivery"]
    assert [h["X-Engram-Delivery"] for h, _ in receiver.posts[:3]] == [first] * 3
    assert sum(1 for h, _ in receiver.posts if h["X-Engram-Delivery"] == first) == 3


def test_a_receiver_that_never_answers_does_not_hold_up_ingest(tmp_path, monkeypatch):
    from engram.boot.embedded import Engram
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "engram.json").write_text(json.dumps({"embedder": {"name": "hashing"}, "webhooks": [
        {"url": "http://127.0.0.1:9/unreachable", "secret": SECRET, "queue": 3}]}))
    release = threading.Event()
    engram = Engram(InProcessRuntime(load_service_config(home)).start())
    hooks = engram.start_webhooks(post=lambda *a: release.wait(30) and 204)  # a receiver that hangs
    try:
        started = time.perf_counter()
        for i in range(30):
            engram.append_messages(AGENT, "talk", t.AppendRequest(messages=[
                t.Message(role="user", content=f"Fact number {i}: the locker is on floor {i}.")]))
        engram.wait_idle()
        assert time.perf_counter() - started < 60
        assert wait_for(lambda: hooks.hooks[0].dropped > 0)  # its bounded queue dropped the oldest, logged
    finally:
        release.set()
        engram.close()


def test_a_webhook_without_a_secret_or_with_a_bad_url_is_a_settings_error(tmp_path):
    from engram.config.service import load_service_config

    home = tmp_path / "home"
    home.mkdir()
    for hook, said in (({"url": "http://example.com/h"}, "secret"), ({"url": "file:///etc/passwd", "secret": SECRET},
                                                                       "url")):
        (home / "engram.json").write_text(json.dumps({"webhooks": [hook]}))
        with pytest.raises(Exception) as refused:
            load_service_config(home)
        assert said in str(refused.value)

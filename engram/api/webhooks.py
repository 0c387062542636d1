"""Outgoing webhooks: memory created, updated and forgotten, POSTed to the URLs the home's owner configured.

A dispatcher follows the log through the `/v1/events` feed (`engram.api.events`), so ingest never waits for it: the
feed's subscriber queue is bounded, and a dispatcher that falls behind resumes from its position. Each webhook has its
own sender thread and bounded queue; a delivery is retried with doubling backoff (`maxAttempts`, `backoffSeconds`),
then dropped with one log line. Every POST carries `X-Engram-Event`, `X-Engram-Delivery` (the event's position,
stable across retries: a receiver drops repeats by it) and `X-Engram-Signature: sha256=<HMAC-SHA256 of the body with
the webhook's secret, hex>`.

    memory.created    TraceEncoded, ChunkSummarized, VectorMemoryStored (the memory's text travels with it)
    memory.updated    MemoryEdited
    memory.forgotten  MemoryDeleted, DiscussionForgotten, AgentForgotten (ids only)
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from engram.api.events import stream

if TYPE_CHECKING:
    import httpx

    from engram.api.events import EventFeed
    from engram.config.service import WebhookSettings

log = logging.getLogger(__name__)

# A memory change as a webhook sends it (JSON).
Body = dict[str, Any]

CREATED = {"TraceEncoded": ("trace", "trace_id", "content"), "ChunkSummarized": ("chunk", "memory_id", "summary"),
           "VectorMemoryStored": ("vector", "memory_id", "summary")}
TYPES = frozenset({*CREATED, "MemoryEdited", "MemoryDeleted", "DiscussionForgotten", "AgentForgotten"})


def sign(key: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(key, body, hashlib.sha256).hexdigest()


def notification(data: dict[str, Any]) -> tuple[str, Body] | None:
    """The webhook event of one log event (the feed's data), or None when it is none of theirs."""
    kind = data["type"]
    payload = data["payload"]
    base = {"agent": data["agent"], "seq": data["seq"], "shard": data["shard"], "ts": data["ts"]}
    stream_ = data["stream"]
    discussion = None if stream_.startswith("agent:") else stream_
    if kind in CREATED:
        memory_kind, id_field, text_field = CREATED[kind]
        return "memory.created", {**base, "kind": memory_kind, "memory_id": payload.get(id_field) or "",
                                  "discussion": discussion, "content": payload.get(text_field, "")}
    if kind == "MemoryEdited":
        return "memory.updated", {**base, "kind": payload["kind"], "memory_id": payload["memory_id"],
                                  "discussion": discussion, "content": payload.get("content"),
                                  "title": payload.get("title"), "metadata": payload.get("metadata")}
    if kind == "MemoryDeleted":
        return "memory.forgotten", {**base, "kind": payload["kind"], "memory_id": payload["memory_id"],
                                    "discussion": discussion}
    if kind == "DiscussionForgotten":
        return "memory.forgotten", {**base, "kind": "discussion", "discussion": payload["discussion_id"]}
    if kind == "AgentForgotten":
        return "memory.forgotten", {**base, "kind": "agent"}
    return None


# A transport: post(url, body, headers, timeout) -> HTTP status (tests hand in a stand-in).
Post = Callable[[str, bytes, dict[str, str], float], int]


class Webhook:
    """One configured webhook: its queue and sender thread."""

    def __init__(self, settings: WebhookSettings, post: Post | None = None) -> None:
        self.settings = settings
        self.key = settings.key()
        self.queue: collections.deque[tuple[str, Body]] = collections.deque()
        self.cond = threading.Condition()
        self.stopping = False
        self.delivered = self.dropped = self.failed = 0
        self._post = post or self._http_post
        self._client: httpx.Client | None = None
        self.thread = threading.Thread(target=self._send_loop, name="engram-webhook", daemon=True)
        self.thread.start()

    def wants(self, event: str, agent: str) -> bool:
        s = self.settings
        return event in s.events and (s.agents is None or agent in s.agents)

    def offer(self, event: str, body: Body) -> None:
        with self.cond:
            if len(self.queue) >= self.settings.queue:
                self.queue.popleft()
                self.dropped += 1
                log.warning("webhook %s: queue full (%d), dropped the oldest delivery", self.settings.url,
                            self.settings.queue)
            self.queue.append((event, body))
            self.cond.notify()

    def _send_loop(self) -> None:
        while True:
            with self.cond:
                while not self.queue and not self.stopping:
                    self.cond.wait()
                if self.stopping and not self.queue:
                    return
                event, body = self.queue.popleft()
            self._deliver(event, body)

    def _deliver(self, event: str, body: Body) -> None:
        raw = json.dumps({"event": event, **body}, separators=(",", ":"), ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "engram-webhook", "X-Engram-Event": event,
                   "X-Engram-Delivery": f"{body['shard']}-{body['seq']}", "X-Engram-Signature": sign(self.key, raw)}
        delay = self.settings.backoff_seconds
        for attempt in range(1, self.settings.max_attempts + 1):
            try:
                status = self._post(self.settings.url, raw, headers, self.settings.timeout_seconds)
                if 200 <= status < 300:
                    self.delivered += 1
                    return
                reason = f"HTTP {status}"
            except Exception as exc:  # unreachable, timed out: retried like a 5xx
                reason = f"{type(exc).__name__}: {exc}"
            if attempt == self.settings.max_attempts or self.stopping:
                break
            time.sleep(delay)
            delay *= 2
        self.failed += 1
        log.warning("webhook %s: %s %s not delivered after %d attempts (%s)", self.settings.url, event,
                    headers["X-Engram-Delivery"], attempt, reason)

    def _http_post(self, url: str, raw: bytes, headers: dict[str, str], timeout: float) -> int:
        import httpx

        if self._client is None:
            self._client = httpx.Client(follow_redirects=False)
        return self._client.post(url, content=raw, headers=headers, timeout=timeout).status_code

    def close(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify()


class WebhookDispatcher:
    """Follows the log (from when it starts) and hands each memory change to the webhooks that want it."""

    def __init__(self, feed: EventFeed, settings: list[WebhookSettings], post: Post | None = None) -> None:
        self.feed = feed
        self.hooks = [Webhook(s, post) for s in settings]
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._follow, name="engram-webhooks", daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        after = None
        while not self._stop.is_set():
            frames = stream(self.feed, after=after, agents=None, types=TYPES, keepalive_s=1.0)
            try:
                for name, ident, data in frames:
                    if self._stop.is_set():
                        return
                    if name == "cut":  # fell behind: read on from where it was, from the log
                        after = [int(x) for x in ident.split(".")]
                        break
                    if not name:
                        continue
                    after = [int(x) for x in ident.split(".")]
                    found = notification(json.loads(data))
                    if found is not None:
                        event, body = found
                        for hook in self.hooks:
                            if hook.wants(event, body["agent"]):
                                hook.offer(event, body)
            except Exception as exc:  # the runtime restarting: resume from the position
                log.warning("webhooks: %s", exc)
                self._stop.wait(1.0)
            finally:
                frames.close()

    def close(self) -> None:
        self._stop.set()
        for hook in self.hooks:
            hook.close()

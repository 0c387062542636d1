"""An endpoint's `retry-after` is honoured: a busy server's asked wait is what engram sleeps before the next attempt
(seconds, milliseconds or an HTTP date), and a wait over `maxRetryAfterSeconds` gives up at once instead of
sleeping it. The HTTP answers come from httpx's MockTransport, a stand-in for the server that shapes a 429 exactly as
OpenAI-compatible servers send it: no engram code runs behind the transport."""

from __future__ import annotations

import httpx
import pytest

from engram.config.llm import Endpoint
from engram.providers.endpoints.client import EndpointClient
from engram.providers.endpoints.wire import CallFailed, Request

ANSWER = {"id": "c1", "object": "chat.completion", "model": "tiny",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
          "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
BUSY = {"error": {"message": "server busy", "type": "rate_limit"}}


def client_answering(*answers: httpx.Response, **endpoint) -> tuple[EndpointClient, list[float], list[httpx.Request]]:
    sent: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return queue.pop(0)

    waits: list[float] = []
    config = Endpoint(api_type="openAIChatCompletion", base_url="http://127.0.0.1:9", model="tiny", max_retries=3,
                      retry_initial_delay_seconds=0.01, retry_max_delay_seconds=0.01, timeout_seconds=5,
                      max_context_tokens=2048, **endpoint)  # its window stated: no probe of /props
    client = EndpointClient("local", config, env={}, sleep=waits.append, transport=httpx.MockTransport(handle))
    return client, waits, sent


REQUEST = Request(model="tiny", system="", messages=(("user", "hi"),), max_tokens=8)


@pytest.mark.parametrize("headers, wait", [
    ({"retry-after": "7"}, 7.0),
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after": "Thu, 03 Dec 2026 12:00:09 GMT", "date": "Thu, 03 Dec 2026 12:00:00 GMT"}, 9.0),
])
def test_a_busy_servers_retry_after_is_the_wait_before_the_next_attempt(headers, wait):
    client, waits, sent = client_answering(httpx.Response(429, json=BUSY, headers=headers),
                                           httpx.Response(200, json=ANSWER))
    assert client.create(REQUEST)[0].text == "hello"
    assert waits == [wait] and len(sent) == 2


def test_without_retry_after_the_backoff_applies():
    client, waits, sent = client_answering(httpx.Response(503, json=BUSY), httpx.Response(200, json=ANSWER))
    assert client.create(REQUEST)[0].text == "hello"
    assert len(waits) == 1 and 0.0 < waits[0] <= 0.01 and len(sent) == 2


def test_a_wait_over_max_retry_after_seconds_gives_up_at_once_and_says_why():
    client, waits, sent = client_answering(httpx.Response(429, json=BUSY, headers={"retry-after": "3600"}),
                                           max_retry_after_seconds=120)
    with pytest.raises(CallFailed) as failed:
        client.create(REQUEST)
    assert waits == [] and len(sent) == 1 and failed.value.transient
    assert "retry-after 3600s exceeds maxRetryAfterSeconds (120s)" in failed.value.error

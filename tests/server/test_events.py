"""`GET /v1/events`: a subscriber sees every event of its agent, in order, and nothing of others; it resumes with
Last-Event-ID; a subscriber too slow to keep up is cut with a final event and never holds up an append."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from urllib.parse import urlsplit

import pytest

from tests.server.test_keys import cli

ALICE, BOB = "alice", "bob"
BOB_SECRET = "Bob's locker code is 4711."
# Bob's code as a number of its own: "4711" inside a timestamp's microseconds or a hex content hash is chance, not a leak
BOB_CODE = re.compile(r"(?<![0-9a-fA-F])4711(?![0-9a-fA-F])")


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    from tests.server.helpers import served_home

    home = tmp_path_factory.mktemp("events") / "home"
    home.mkdir()
    with served_home(home, groups=[]) as mem:
        key_a = cli(home, "keys", "add", "--agents", ALICE).splitlines()[0]
        token = json.loads((home / "instance.json").read_text())["token"]
        yield mem, home, key_a, token


def say(mem, agent: str, discussion: str, text: str) -> int:
    from engram.api import types as t

    answer = mem.append_messages(agent, discussion, t.AppendRequest(messages=[t.Message(role="user", content=text)]))
    return answer.results[-1].seqs[-1]


def open_stream(home, key: str, query: str = "", headers: dict | None = None):
    url = urlsplit(json.loads((home / "instance.json").read_text())["url"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    conn.request("GET", "/v1/events" + query, headers={"Authorization": f"Bearer {key}", **(headers or {})})
    return conn, conn.getresponse()


def frames(resp):
    """(event, id, data) of each SSE frame; ("", "", "") for a comment (keep-alive)."""
    name = ident = data = ""
    comment = False
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\n")
        if not line:
            if name or data:
                yield name, ident, data
            elif comment:
                yield "", "", ""
            name = ident = data = ""
            comment = False
        elif line.startswith(":"):
            comment = True
        elif line.startswith("event: "):
            name = line[7:]
        elif line.startswith("id: "):
            ident = line[4:]
        elif line.startswith("data: "):
            data = line[6:]


def test_a_subscriber_sees_every_event_of_its_agent_in_order_and_nothing_of_others(keyed):
    mem, home, key_a, _ = keyed
    start = sum(mem.rt.heads().values())
    conn, resp = open_stream(home, key_a, f"?after={start}")
    assert resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream")
    got, raw = [], []

    def read():
        for name, ident, data in frames(resp):
            if name:
                raw.append(data)
                got.append((name, int(ident), json.loads(data)))
                if "Alice message number 19." in data:
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    alice_seqs = []
    for i in range(20):  # interleaved with bob's, while the subscriber is connected
        alice_seqs.append(say(mem, ALICE, "alice-talk", f"Alice message number {i}."))
        say(mem, BOB, "bob-talk", f"{BOB_SECRET} ({i})")
    reader.join(timeout=30)
    conn.close()
    logged = [r for r in mem.rt.read(ALICE, start, limit=None) if r.agent == ALICE and r.seq <= alice_seqs[-1]]
    assert [seq for _, seq, _ in got] == [r.seq for r in logged]  # every one, in log order
    assert [name for name, _, _ in got] == [r.type for r in logged]
    messages = [d["payload"]["content"] for name, _, d in got if name == "MessageAppended"]
    assert messages == [f"Alice message number {i}." for i in range(20)]
    assert {d["agent"] for _, _, d in got} == {ALICE}
    assert not any(BOB in d or BOB_CODE.search(d) for d in raw)


def test_last_event_id_resumes_right_after_the_last_event_seen(keyed):
    mem, home, key_a, _ = keyed
    start = sum(mem.rt.heads().values())
    seqs = [say(mem, ALICE, "alice-resume", f"Resume test {i}.") for i in range(6)]
    conn, resp = open_stream(home, key_a, f"?after={start}&follow=false&type=MessageAppended")
    first = [(n, i) for n, i, _ in frames(resp)]
    conn.close()
    assert [int(i) for n, i in first if n == "MessageAppended"] == seqs and first[-1][0] == "caught-up"
    conn, resp = open_stream(home, key_a, "?follow=false", {"Last-Event-ID": str(seqs[2])})
    again = [(n, json.loads(d)) for n, _, d in frames(resp)]
    conn.close()
    assert [d["seq"] for n, d in again if n == "MessageAppended"] == seqs[3:]


def test_a_key_asking_for_another_agents_events_is_answered_as_for_an_unknown_agent(keyed):
    mem, home, key_a, token = keyed
    conn, resp = open_stream(home, key_a, f"?agent={BOB}")
    body = json.loads(resp.read())
    conn.close()
    assert resp.status == 404 and body["error"]["code"] == "unknown_agent" and "locker" not in json.dumps(body)
    conn, resp = open_stream(home, token, "?after=0&follow=false")  # the home's owner sees every agent
    agents = {json.loads(d)["agent"] for n, _, d in frames(resp) if n not in ("", "caught-up")}
    conn.close()
    assert {ALICE, BOB} <= agents


def test_a_slow_subscriber_is_cut_with_a_final_event_and_never_blocks_an_append(keyed):
    from engram.api.events import stream

    mem, home, _, _ = keyed
    frames_ = stream(mem.event_feed(), after=None, agents=frozenset({ALICE}), types=None, buffer=5, keepalive_s=0.2)
    assert next(frames_) == ("", "", "")  # subscribed: nothing new yet (a keep-alive)
    started = time.perf_counter()
    for i in range(20):  # the subscriber takes nothing meanwhile
        say(mem, ALICE, "alice-slow", f"Slow subscriber test {i}.")
    assert time.perf_counter() - started < 10
    time.sleep(0.5)  # the feed hands them out
    name, ident, data = next(frames_)
    assert name == "cut" and "too slow" in json.loads(data)["reason"]
    assert json.loads(data)["resume"] == ident
    with pytest.raises(StopIteration):
        next(frames_)

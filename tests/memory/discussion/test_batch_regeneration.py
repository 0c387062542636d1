"""Regeneration through the Message Batches API: the real anthropic SDK against the local fake Messages API
(batches created, polled through `processing_status`, results as JSON lines), an in-process engram (real log,
projections, Summarizer, embedder), the job as the API runs it."""

from __future__ import annotations

import hashlib
import json

import msgspec
import pytest
from tests.memory.discussion.conftest import ingest, messages, write_settings
from tests.providers.llm.fake_messages_api import FAST_RETRIES, FakeMessagesApi

from engram.api import types as t
from engram.api.errors import ApiError
from engram.config.llm import BatchSettings, Endpoint, LlmConfig, Preset

AGENTS = ("ann", "bob")
MEMORY = {"title": "T", "summary": "S", "entities": ["Ann"], "key_phrases": ["plans"], "sentiment": "neutral",
          "topics": ["life"]}


def answer(body: dict) -> str:
    """The same prompt always gets the same answer (live or batched), and different prompts differ."""
    text = json.dumps([body["system"], body["messages"]], sort_keys=True)
    if body["system"][0]["text"].startswith("You turn a conversation excerpt into one structured"):
        return json.dumps({**MEMORY, "title": "Memory " + hashlib.sha256(text.encode()).hexdigest()[:8]})
    return "Summary " + hashlib.sha256(text.encode()).hexdigest()[:12]


@pytest.fixture
def fake(monkeypatch):
    api = FakeMessagesApi().start()
    api.answer = answer
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    yield api
    api.stop()


def open_home(root, fake):
    from engram.api.service import Api
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    llm = LlmConfig(provider="anthropic",
                    endpoints={"default": Endpoint(model="claude-sonnet-5-5", **FAST_RETRIES, timeout_seconds=5.0,
                                                   base_url=fake.url)},
                    presets={"default": Preset(temperature=0.2, max_tokens=512)},
                    batches=BatchSettings(poll_interval_seconds=0.0))
    config = load_service_config(root).model_copy(update={"llm": llm})
    config = config.model_copy(update={"ray": config.ray.model_copy(update={"pools": {"summarizer": 1}})})
    rt = InProcessRuntime(config, groups=["summarizer"], wall_clock=False, snapshots=False, auto_settle=False).start()
    rt.start_policies()
    return Api(rt)


class Engine:
    """What `tests.memory.discussion.conftest.ingest` drives: an Api's runtime."""

    def __init__(self, api):
        self.api = api

    def sync_settings(self, agent, ts_us=None):
        return self.api.rt.sync_settings(agent, ts_us)

    def append(self, writes):
        return self.api.rt.append(writes)

    def settle(self):
        self.api.rt.settle()


def home_with_history(tmp_path, fake, name: str, count: int):
    root = tmp_path / name
    root.mkdir()
    write_settings(root, chunkEstimatedTokenSize=60, vectorMemoryChunkEstimatedTokenSize=60)
    api = open_home(root, fake)
    for agent in AGENTS:
        for d in ("d1", "d2"):
            ingest(Engine(api), f"{agent}-{d}", messages(count, start=10 if d == "d2" else 0), agent=agent)
    return api


def generation_events(api, generation: int) -> dict:
    """Every memory event of `generation`, per discussion, without what differs between a live call and a
    batched one (latency, price, the batch id) and without the positions of causes."""
    out = {}
    for agent in AGENTS:
        for d in ("d1", "d2"):
            recs = api.rt.read(agent, stream=f"{agent}-{d}", limit=None,
                               types=["MemoryFileCreated", "ChunkSummarized", "VectorMemoryStored", "RollingSummaryUpdated"])
            rows = []
            for r in recs:
                if r.event.generation != generation:
                    continue
                ev = msgspec.to_builtins(r.event)
                if ev.get("llm"):
                    ev["llm"] = {k: v for k, v in ev["llm"].items() if k not in ("latency_ms", "cost_usd", "batch_id")}
                rows.append((r.event_id, ev))
            out[f"{agent}-{d}"] = rows
    return out


def memory_file(api, agent, d) -> list[dict]:
    path = api.home.projections_dir / "agents" / agent / "Public" / f"{d}_memories.jsonl"
    return [{k: v for k, v in json.loads(line).items() if k not in ("llm", "batch_id", "created_at")}  # created_at: when each home ran it
            for line in path.read_text().splitlines()]


def run_batch(api, **req):
    job = api.regenerate_batch(t.BatchRegenerateRequest(**req))
    done = api.jobs.wait(job.id, timeout=120)
    assert done.state == "succeeded", done.error
    api.rt.settle()
    return done.result


def test_a_home_of_two_agents_and_two_discussions_each_regenerates_in_one_batch_equal_to_a_live_regeneration(
        tmp_path, fake):
    live = home_with_history(tmp_path, fake, "live", 10)
    batched = home_with_history(tmp_path, fake, "batched", 10)
    try:
        for agent in AGENTS:
            for d in ("d1", "d2"):
                job = live.regenerate(agent, f"{agent}-{d}", t.RegenerateRequest())
                assert live.jobs.wait(job.id, timeout=120).state == "succeeded"
        live.rt.settle()
        creates = fake.batch_creates
        result = run_batch(batched, resume=False)
        assert fake.batch_creates - creates == 1, result  # every discussion's chunk and vector memory: one Message Batch
        batch = fake.batches[f"msgbatch_{fake.batch_creates:04d}"]
        assert len(batch["requests"]) == 8 and result["applied"] == 4 and result["failed"] == {}
        assert generation_events(batched, 1) == generation_events(live, 1)
        assert all(sum(ev["type"] == "ChunkSummarized" for _, ev in rows) == 1 for rows in generation_events(live, 1).values())
        for agent in AGENTS:
            for d in ("d1", "d2"):
                assert memory_file(batched, agent, f"{agent}-{d}") == memory_file(live, agent, f"{agent}-{d}")
        stored = batched.rt.read("ann", stream="ann-d1", limit=None, types=["ChunkSummarized"])
        assert stored[-1].event.llm.batch_id and stored[-1].event.generation == 1  # provenance names the batch
        # The Summarizer adopted the batch's generation: later messages go on from its last chunk, no call repeated.
        requests = len(fake.requests)
        ingest(Engine(batched), "ann-d1", messages(6, start=10), agent="ann")
        after = batched.rt.read("ann", stream="ann-d1", limit=None, types=["ChunkSummarized"])[len(stored):]
        assert [(c.event.generation, c.event.message_ids[0], c.event.mode) for c in after] == [(1, "m6", "standard")]
        vectors = [v for v in batched.rt.read("ann", stream="ann-d1", limit=None, types=["VectorMemoryStored"])
                   if v.event.generation == 1 and v.causation is not None]  # decided live (the batch's have none)
        assert len(fake.requests) == requests + len(after) + len(vectors)  # only the new memories, live
    finally:
        live.close()
        batched.close()


def test_dependent_calls_go_in_rounds_and_still_equal_the_live_regeneration(tmp_path, fake):
    live = home_with_history(tmp_path, fake, "live", 16)
    batched = home_with_history(tmp_path, fake, "batched", 16)
    try:
        for agent in AGENTS:
            for d in ("d1", "d2"):
                live.jobs.wait(live.regenerate(agent, f"{agent}-{d}", t.RegenerateRequest()).id, timeout=120)
        live.rt.settle()
        creates = fake.batch_creates
        result = run_batch(batched, agent="ann")
        # The second chunk memory's prompt holds the first: two rounds, one batch each, for ann's two discussions.
        assert fake.batch_creates - creates == 2 and result["applied"] == 2
        got, want = generation_events(batched, 1), generation_events(live, 1)
        assert got["ann-d1"] == want["ann-d1"] and got["ann-d2"] == want["ann-d2"] and got["bob-d1"] == []
        assert sum(ev["type"] == "ChunkSummarized" for _, ev in got["ann-d1"]) == 2
    finally:
        live.close()
        batched.close()


class Crash(Exception):
    pass


def interrupt_a_batch_regeneration(tmp_path, fake, monkeypatch) -> int:
    """A home whose batch regeneration died after its batch was accepted, before its results were kept (the
    server killed mid-job); the number of batches submitted so far."""
    from engram.api import batch_regen

    api = home_with_history(tmp_path, fake, "home", 10)
    fake.polls_before_end = 3
    real = batch_regen.BatchRegeneration._collect

    def crash(self, results):
        raise Crash()

    monkeypatch.setattr(batch_regen.BatchRegeneration, "_collect", crash)
    job = api.regenerate_batch(t.BatchRegenerateRequest())
    assert api.jobs.wait(job.id, timeout=60).state == "failed"
    api.close()
    monkeypatch.setattr(batch_regen.BatchRegeneration, "_collect", real)
    return fake.batch_creates


def test_a_job_killed_while_its_batch_runs_is_resumed_from_its_journal_by_the_next_server_once_no_other_process_runs_it(
        tmp_path, fake, monkeypatch):
    import subprocess
    import sys

    submitted = interrupt_a_batch_regeneration(tmp_path, fake, monkeypatch)
    again = open_home(tmp_path / "home", fake)
    # Another replica of the server (another process) has claimed the journal: this one leaves it alone.
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys; from engram.api.batch_regen import Claim; from engram.config.home import Home; "
         "claim = Claim.take(Home(sys.argv[1])); print('held' if claim else 'free', flush=True); sys.stdin.read()",
         str(tmp_path / "home")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "held"
        assert again.resume_interrupted() is None
        assert again.status().interrupted == []  # it runs elsewhere: not reported as interrupted
        with pytest.raises(ApiError) as busy:
            again.regenerate_batch(t.BatchRegenerateRequest(resume=True))
        assert busy.value.code == "conflict" and "is running" in busy.value.message
        assert fake.batch_creates == submitted
    finally:
        other.communicate("")  # that process ends without finishing the job: its claim goes with it
    try:
        [said] = again.status().interrupted
        assert said.startswith("batch regeneration regen-") and "interrupted with 0 of 4 discussion(s) done" in said
        assert "engram regenerate --resume" in said
        with pytest.raises(ApiError) as refused:
            again.regenerate_batch(t.BatchRegenerateRequest())
        assert refused.value.code == "conflict" and "--resume" in refused.value.message
        said = again.resume_interrupted()  # what a server does when it starts
        assert said is not None and said.startswith("resuming the batch regeneration a restart interrupted (job ")
        assert again.resume_interrupted() is None  # resumed once, however many replicas start
        [job] = [j for j in again.jobs.list().jobs if j.kind == "regenerate"]
        done = again.jobs.wait(job.id, timeout=120)
        assert done.state == "succeeded", done.error
        assert fake.batch_creates == submitted  # the accepted batch was collected, not sent again
        assert done.result["resumed_batches"] == 1 and done.result["applied"] == 4
        assert again.status().interrupted == []
        assert len(again.rt.read("bob", stream="bob-d2", limit=None, types=["ChunkSummarized"])) >= 1
        assert again.resume_interrupted() is None
        with pytest.raises(ApiError) as nothing:
            again.regenerate_batch(t.BatchRegenerateRequest(resume=True))
        assert nothing.value.code == "conflict" and "none was interrupted" in nothing.value.message
    finally:
        again.close()


def test_errored_requests_are_reported_and_only_they_are_asked_again(tmp_path, fake):
    from engram.memory.discussion.batch_plan import discussion_prefix

    api = home_with_history(tmp_path, fake, "home", 10)
    prefix = discussion_prefix("bob", "bob-d2", 1)

    class FirstAttemptOfBobD2(set):
        def __contains__(self, cid):
            return cid.startswith(prefix) and cid.endswith("-a0")

    fake.errored_custom_ids = FirstAttemptOfBobD2()
    try:
        creates = fake.batch_creates
        result = run_batch(api)
        assert fake.batch_creates - creates == 2 and result["retried"] == 2 and result["applied"] == 4
        retry = fake.batches[f"msgbatch_{fake.batch_creates:04d}"]["requests"]
        assert {r["custom_id"].rsplit("-a", 1)[1] for r in retry} == {"1"}
        assert all(r["custom_id"].startswith(prefix) for r in retry) and len(retry) == 2
    finally:
        api.close()


def test_with_the_offline_heuristic_a_batch_regeneration_is_refused_with_the_reason(tmp_path):
    from engram.api.service import Api
    from engram.config.service import load_service_config
    from engram.runtime.inprocess import InProcessRuntime

    root = tmp_path / "home"
    root.mkdir()
    api = Api(InProcessRuntime(load_service_config(root), groups=["summarizer"], auto_settle=False).start())
    try:
        with pytest.raises(ApiError) as refused:
            api.regenerate_batch(t.BatchRegenerateRequest())
        assert refused.value.code == "invalid_request" and "offline heuristic has no batch API" in refused.value.message
    finally:
        api.close()


@pytest.mark.parametrize("args, says", [
    (["--all"], "--all regenerates every discussion through the Message Batches API: add --batch"),
    (["--all", "--batch", "--settings", "s.json"], "--settings applies to one live regeneration"),
    (["--resume", "--agent", "ann"], "--resume continues the interrupted job as it was planned"),
    (["--batch"], "--batch needs what to regenerate: --all, --agent A or --discussion ID"),
    (["--all", "--batch", "--agent", "ann"], "--all means every discussion of the home"),
    ([], "give --discussion ID (or --all --batch"),
])
def test_regenerate_options_that_do_not_fit_together_are_one_line_errors(tmp_path, capsys, args, says):
    from engram.cli.main import main

    assert main(["--home", str(tmp_path), "regenerate", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1


def test_engram_regenerate_all_batch_through_the_server_and_its_refusal_offline(tmp_path, fake, capsys, monkeypatch):
    from engram.cli.main import main
    from tests.server.helpers import Served, served_home

    api = home_with_history(tmp_path, fake, "home", 10)
    try:
        with Served(api, tmp_path / "home"):
            code = main(["--home", str(tmp_path / "home"), "regenerate", "--all", "--batch"])
            out = capsys.readouterr().out
            assert code == 0 and "4 of 4 discussions regenerated" in out and "8 requests in 1 Message Batches" in out
            assert main(["--home", str(tmp_path / "home"), "regenerate", "--resume"]) == 2
            assert "no batch regeneration to resume" in capsys.readouterr().err
    finally:
        api.close()
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # "auto" then chooses the offline heuristic
    offline = tmp_path / "offline"
    offline.mkdir()
    with served_home(offline, groups=["summarizer"]):
        assert main(["--home", str(offline), "regenerate", "--all", "--batch"]) == 2
        err = capsys.readouterr().err
        assert "the offline heuristic has no batch API: regenerate without --batch" in err and err.count("\n") == 1

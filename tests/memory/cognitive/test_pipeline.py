"""Cognitive memory end to end on real Ray actors, DuckDB, hnswlib and the MiniLM embedder.

One home for the module: the sample conversation is ingested once for an agent whose
agent.config.json gives it an open personality; tests then recall, reinforce, prune, learn.
"""

from __future__ import annotations

import json
import time

import pytest
import ray

from engram.api import types as t
from engram.events.envelope import NewEvent, Write, from_us
from engram.memory.cognitive.decay import decay_sweep
from engram.memory.cognitive.model import MemoryTrace
from engram.memory.ingest.formats import parse_file
from engram.memory.ingest.messages import discussion_write

pytestmark = pytest.mark.ray

AGENT = "priya-helper"
SAMPLE = "engram/samples/acme-dashboard.jsonl"
HOUR_US = 3_600 * 1_000_000


@pytest.fixture(scope="module")
def world(ray_session, tmp_path_factory):
    from engram.config.service import load_service_config
    from engram.boot.embedded import Engram
    from engram.runtime.ray_runtime import RayRuntime

    home = tmp_path_factory.mktemp("cognitive") / "home"
    (home / "agents" / AGENT).mkdir(parents=True)
    (home / "agents" / AGENT / "agent.config.json").write_text(
        # No consolidation runs here (issue 6): these tests pin what ingest, recall and explicit sweeps do.
        json.dumps({"personality": {"openness": 0.7}, "mood": {"valence": 0.0},
                    "memory": {"consolidation": {"enabled": False}}})
    )
    # Two trace readers and two working-memory actors per shard: recall and focus route to the owner member.
    (home / "engram.json").write_text(json.dumps({"ray": {"pools": {"traces": 2, "working-memory": 2}}}))
    config = load_service_config(home)
    mem = Engram(RayRuntime(config).start())
    convs = parse_file(SAMPLE, now_us=0)
    write = discussion_write(AGENT, convs[0].discussion, convs[0].messages, max_message_chars=100_000)
    mem.sync_settings(AGENT, ts_us=write.events[0].ts_us)
    mem.append([write])
    assert mem.wait_idle(timeout=300)
    last_ts = max(e.ts_us for e in write.events)
    yield mem, Cog(mem), convs[0].discussion, last_ts
    mem.close()


class Cog:
    """Cognitive memory through the API and, for recall, the runtime's domain result (factors as numbers)."""

    def __init__(self, mem):
        self.mem = mem

    def recall(self, agent, query, *, now_us, **options):
        self.mem.sync_settings(agent)
        return self.mem.rt.recall(agent, query, min_position=None, now_us=now_us, **options)

    def source_messages(self, result):
        return self.mem._sources(result)

    def working_memory(self, agent):
        return self.mem.working_memory(agent)

    def write_working_memory(self, agent, markdown):
        return self.mem.write_working_memory(agent, t.WorkingMemoryWrite(markdown=markdown))

    def set_mood(self, agent, valence, arousal, dominance, *, ts_us):
        return self.mem.set_mood(agent, t.MoodRequest(valence=valence, arousal=arousal, dominance=dominance,
                                                      ts=from_us(ts_us)))

    def record_tool_failure(self, agent, discussion, tool, error, *, call_id, ts_us):
        return self.mem.record_tool_failure(agent, discussion, t.ToolFailureRequest(tool=tool, error=error, call_id=call_id,
                                                                                    ts=from_us(ts_us)))


def rows(mem, sql, params=None):
    names, data = mem.sql(sql, params)
    return [dict(zip(names, r)) for r in data]


def test_the_pools_have_the_configured_sizes(world):
    mem = world[0]
    sizes = {}
    for group, _, _ in mem.runtime.policies():
        sizes[group] = sizes.get(group, 0) + 1
    assert sizes["traces"] == 2 and sizes["working-memory"] == 2  # configured
    assert sizes["summarizer"] == 2 and sizes["observer"] == 1  # the defaults


def test_every_user_message_and_the_facts_worth_keeping_become_traces_with_provenance(world):
    mem, cog, discussion, _ = world
    traces = rows(mem, "SELECT * FROM memory_traces WHERE agent = ?", [AGENT])
    assert len(traces) > 20
    messages = {r["message_id"]: r for r in rows(mem, "SELECT message_id, role, seq FROM messages")}
    for t in traces:
        assert t["source_message_ids"] and all(m in messages for m in t["source_message_ids"])
        assert messages[t["source_message_ids"][0]]["seq"] == t["source_seqs"][0]
        assert t["retrieval_count"] == 0 and t["reinforcement_interval_s"] == 3600.0
        assert t["stability_s"] == (5 * 3600.0 if t["flashbulb"] else 3600.0)
    user_messages = {m for m, r in messages.items() if r["role"] == "user"}
    ingested = rows(mem, "SELECT message_id, trace_ids, skipped FROM ev_facts_ingested")
    assert {r["message_id"] for r in ingested} >= user_messages  # each user turn was looked at
    episodes = [t for t in traces if t["category"] == "message"]
    facts = [t for t in traces if t["category"] not in ("message", "lesson")]
    assert episodes and facts
    assert {t["scope"] for t in facts if t["category"] == "user_preference"} == {"agent"}
    assert {t["scope_id"] for t in episodes} == {discussion}
    # Decisions are visible: what was skipped, and why.
    reasons = {s["reason"] for r in ingested for s in json.loads(r["skipped"])}
    assert reasons & {"duplicate", "below_threshold", "over_limit", "category"}


def test_a_restated_fact_is_not_stored_again_but_verifies_the_trace_it_repeats(world):
    mem, cog, _, last_ts = world
    original = rows(mem, "SELECT trace_id, verification_count FROM memory_traces WHERE content LIKE '%CSS-in-JS%' "
                         "AND category = 'user_preference'")[0]
    count = rows(mem, "SELECT count(*) AS n FROM memory_traces")[0]["n"]
    again = t.Message(role="user", content="I prefer TypeScript everywhere and I really dislike CSS-in-JS.",
                      ts=from_us(last_ts + 1))
    mem.append_messages(AGENT, "second-thread", t.AppendRequest(messages=[again]))
    assert mem.wait_idle(timeout=60)
    (ingested,) = rows(mem, "SELECT trace_ids, skipped FROM ev_facts_ingested WHERE stream = 'second-thread'")
    skipped = json.loads(ingested["skipped"])
    assert json.loads(ingested["trace_ids"]) == []
    assert any(s["reason"] == "duplicate" and s["duplicate_of"] == original["trace_id"] and s["similarity"] >= 0.85
               for s in skipped)
    assert rows(mem, "SELECT count(*) AS n FROM memory_traces")[0]["n"] == count
    now = rows(mem, "SELECT verification_count FROM memory_traces WHERE trace_id = ?", [original["trace_id"]])[0]
    assert now["verification_count"] > original["verification_count"]


def test_personality_comes_from_agent_config_through_the_log(world):
    mem, cog, _, _ = world
    recorded = rows(mem, "SELECT settings FROM ev_settings_changed WHERE agent = ? AND scope = 'agent'", [AGENT])
    assert json.loads(recorded[-1]["settings"])["personality"]["openness"] == 0.7
    wm = cog.working_memory(AGENT)
    assert wm.slots and {s["capacity"] for s in wm.slots} == {8}  # 7 + 1 for openness > 0.6
    assert len(wm.slots) <= 8


def test_recall_returns_the_composite_by_factor_and_the_source_messages(world):
    mem, cog, discussion, last_ts = world
    result = cog.recall(AGENT, "Which CSS approach does Priya dislike?", discussion=discussion, now_us=last_ts + HOUR_US, limit=5)
    assert len(result.hits) == 5
    top = result.hits[0]
    assert "CSS" in top.content
    for h in result.hits:
        assert h.score == pytest.approx(h.contributions.total())
        assert set(h.factors.as_dict()) == {"strength", "similarity", "recency", "emotional", "activation", "importance"}
    sources = cog.source_messages(result)
    assert "CSS-in-JS" in sources[top.source_seqs[0]].content
    # Per-call weights are honoured: similarity alone decides.
    only = cog.recall(AGENT, "Which CSS approach does Priya dislike?", discussion=discussion, now_us=last_ts + HOUR_US,
                      limit=5, weights={"similarity": 1, "strength": 0, "recency": 0, "emotional": 0, "activation": 0, "importance": 0})
    assert all(h.score == pytest.approx(h.factors.similarity) for h in only.hits)


def test_a_reply_carries_the_question_it_answers_and_is_found_by_it(world):
    mem, cog, discussion, last_ts = world
    (reply,) = rows(mem, "SELECT trace_id, content, context, source_message_ids FROM memory_traces WHERE category = "
                         "'message' AND content LIKE 'User: Yes, server components%'")
    assert reply["context"] == "Assistant: Are you using the App Router with server components?"
    assert "App Router" not in reply["content"]
    result = cog.recall(AGENT, "Is Priya on the App Router?", discussion=discussion, now_us=last_ts + HOUR_US, limit=3)
    assert result.similarity == "hybrid"
    # The reply's message is found (by its episode or a fact of it: one memory per message), with its question.
    hit = next(h for h in result.hits if set(h.source_message_ids) & set(reply["source_message_ids"]))
    assert hit.lexical > 0 and hit.context == reply["context"] and hit.context_message_ids
    literal = cog.recall(AGENT, "Is Priya on the App Router?", discussion=discussion, now_us=last_ts + HOUR_US, limit=3,
                         similarity="embedding")
    assert literal.similarity == "embedding" and all(h.lexical == 0 for h in literal.hits)


def test_every_retrieval_is_recorded_after_the_answer_and_reinforces_through_the_fold(world):
    mem, cog, discussion, last_ts = world
    at = last_ts + 2 * HOUR_US
    before = {r["trace_id"]: r for r in rows(mem, "SELECT * FROM memory_traces WHERE agent = ?", [AGENT])}
    result = cog.recall(AGENT, "When is the launch?", discussion=discussion, now_us=at, limit=3)
    ids = [h.trace_id for h in result.hits]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        recorded = rows(mem, "SELECT trace_ids FROM ev_trace_retrieved WHERE query = 'When is the launch?'")
        if recorded:
            break
        time.sleep(0.1)
    assert json.loads(recorded[0]["trace_ids"]) == ids
    assert json.loads(rows(mem, "SELECT via FROM ev_trace_retrieved WHERE query = 'When is the launch?'")[0]["via"]) == [
        h.via for h in result.hits
    ]
    assert mem.wait_idle(timeout=60)
    after = {r["trace_id"]: r for r in rows(mem, "SELECT * FROM memory_traces WHERE agent = ?", [AGENT])}
    for tid in ids:
        assert after[tid]["retrieval_count"] == before[tid]["retrieval_count"] + 1
        assert after[tid]["stability_s"] > before[tid]["stability_s"]
        assert after[tid]["reinforcement_interval_s"] == 2 * before[tid]["reinforcement_interval_s"]


def test_a_traces_life_is_visible_in_sql(world):
    mem, cog, discussion, last_ts = world
    at = last_ts + 3 * HOUR_US
    result = cog.recall(AGENT, "Who handles the Postgres schema?", discussion=discussion, now_us=at, limit=1)
    tid = result.hits[0].trace_id
    assert mem.wait_idle(timeout=60)
    # The Consolidator's rule (issue 6 runs it): a day later the trace has decayed below 0.05.
    row = rows(mem, "SELECT * EXCLUDE (encoded_at, last_access, next_due, deleted_at), epoch_us(last_access) AS la, "
                    "epoch_us(encoded_at) AS ea FROM memory_traces WHERE trace_id = ?", [tid])[0]
    t = MemoryTrace(
        trace_id=tid, agent=AGENT, stream=row["stream"], content=row["content"], trace_type=row["trace_type"],
        scope=row["scope"], scope_id=row["scope_id"], source_type=row["source_type"], source_seqs=(), source_message_ids=(),
        confidence=row["confidence"], valence=0, arousal=0, dominance=0, intensity=row["intensity"], flashbulb=False,
        importance=row["importance"], encoding_strength=row["encoding_strength"], stability_s=row["stability_s"],
        encoded_us=row["ea"], last_access_us=row["la"], interval_s=row["reinforcement_interval_s"], next_due_us=0,
    )
    later = at + 48 * HOUR_US
    pruned = decay_sweep([t], later)
    assert pruned and pruned[0].strength < 0.05
    mem.append([Write(row["stream"], AGENT, (NewEvent(pruned[0], later),))])
    assert mem.wait_idle(timeout=60)
    life = rows(mem, "SELECT change, strength_before, strength_after, retrieval_count FROM trace_changes "
                     "WHERE trace_id = ? ORDER BY seq", [tid])
    changes = [r["change"] for r in life]
    assert changes[0] == "encoded" and "retrieved" in changes and changes[-1] == "pruned"
    retrieved = next(r for r in life if r["change"] == "retrieved")
    assert retrieved["strength_after"] > retrieved["strength_before"]  # reinforced
    assert life[-1]["strength_before"] < 0.05  # decayed
    state = rows(mem, "SELECT active, deleted_reason FROM memory_traces WHERE trace_id = ?", [tid])[0]
    assert state == {"active": False, "deleted_reason": "decay"}
    gone = cog.recall(AGENT, "Who handles the Postgres schema?", discussion=discussion, now_us=later, limit=10)
    # No longer active memory: it can come back only as a dormant trace (found again through its source message,
    # marked pruned, below an active match by its own decayed strength), and being found that way does not revive it.
    back = [h for h in gone.hits if h.trace_id == tid]
    assert all(h.pruned_us is not None and h.via == "dormant" for h in back)
    assert all(h.pruned_us is None for h in gone.hits if h.trace_id != tid)
    assert mem.wait_idle(timeout=60)
    state = rows(mem, "SELECT active, deleted_reason, retrieval_count FROM memory_traces WHERE trace_id = ?", [tid])[0]
    assert state == {"active": False, "deleted_reason": "decay", "retrieval_count": life[-1]["retrieval_count"]}


def test_tool_failures_become_lessons_once_per_discussion_and_surface_later(world):
    mem, cog, discussion, last_ts = world
    for i in range(2):
        cog.record_tool_failure(AGENT, "research-1", "web_browse", "HTTP 403: Cloudflare challenge (CAPTCHA)",
                                call_id=f"c{i}", ts_us=last_ts + i)
    cog.record_tool_failure(AGENT, "research-1", "web_browse", "just a bad day", call_id="c9", ts_us=last_ts + 5)
    assert mem.wait_idle(timeout=60)
    lessons = rows(mem, "SELECT pattern, tool, trace_id FROM ev_lesson_learned WHERE agent = ?", [AGENT])
    assert [(r["pattern"], r["tool"]) for r in lessons] == [("anti_bot", "web_browse")]
    result = cog.recall(AGENT, "the website blocked my browser with a captcha, what should I do?", discussion=discussion,
                        now_us=last_ts + HOUR_US, limit=3)
    assert lessons[0]["trace_id"] in [h.trace_id for h in result.hits]
    assert "web_search or stealth_navigate" in next(h.content for h in result.hits if h.trace_id == lessons[0]["trace_id"])


def test_mood_is_recorded_and_drives_emotional_congruence(world):
    mem, cog, discussion, last_ts = world
    cog.set_mood(AGENT, 0.9, 0.2, 0.1, ts_us=last_ts + 10)
    assert mem.wait_idle(timeout=60)
    result = cog.recall(AGENT, "How did Priya feel?", discussion=discussion, now_us=last_ts + HOUR_US, limit=10)
    assert result.mood.valence == 0.9
    valences = {r["trace_id"]: r["valence"] for r in rows(mem, "SELECT trace_id, valence FROM memory_traces")}
    for h in result.hits:
        assert h.factors.emotional == pytest.approx(max(0.0, 0.9 * valences[h.trace_id]))


def test_working_memory_file_and_table(world):
    mem, cog, _, _ = world
    wm = cog.working_memory(AGENT)
    assert wm.markdown.startswith("# Working Memory") and "## In Focus" in wm.markdown
    assert any(tag in wm.markdown for tag in ("[ACTIVE]", "[fading]", "[weak]"))
    assert [s["rank"] for s in wm.slots] == list(range(1, len(wm.slots) + 1))
    cog.write_working_memory(AGENT, "## Notes\n- Priya's launch is on March 12\n")
    assert mem.wait_idle(timeout=60)
    assert "Priya's launch is on March 12" in cog.working_memory(AGENT).markdown


def test_replay_reproduces_traces_edges_index_and_working_memory(world):
    mem, cog, _, _ = world
    assert mem.wait_idle(timeout=60)
    assert mem.rt.verify_replay([mem.rt.shard_of(AGENT)]) == []
    files = {p.name for p in (mem.runtime.home.projections_dir / "agents" / AGENT).iterdir()}
    assert {"traces.hnsw", "traces.hnsw.json", "working-memory.md"} <= files


def test_a_recall_embeds_its_query_in_the_readers_process_not_through_the_embedder_actor(world):
    import ray

    mem, cog, discussion, last_ts = world
    actor = mem.runtime.embedder()
    assert mem.wait_idle(timeout=120)
    before = ray.get(actor.stats.remote())
    result = cog.recall(AGENT, "Which charting library renders the dashboard graphs?", discussion=discussion,
                        now_us=last_ts + 3 * HOUR_US, limit=3)
    assert result.hits
    after = ray.get(actor.stats.remote())
    assert after["texts_requested"] == before["texts_requested"]  # the query and its HyDE text: in-process


def test_concurrent_recalls_on_one_reader_answer_as_they_do_one_at_a_time(world):
    from concurrent.futures import ThreadPoolExecutor

    _, cog, discussion, last_ts = world
    at = last_ts + 5 * HOUR_US
    questions = ["When is the launch?", "Who handles the Postgres schema?", "Which CSS approach does Priya dislike?",
                 "Where is Priya going after launch?"]

    def ranked(q):
        return [(h.trace_id, round(h.score, 6)) for h in cog.recall(AGENT, q, now_us=at, limit=3, discussion=discussion,
                                                                   record=False).hits]

    alone = [ranked(q) for q in questions]
    with ThreadPoolExecutor(8) as pool:  # the reader serves them side by side (TraceReader.concurrent_reads)
        together = list(pool.map(ranked, questions * 2))
    assert all(alone) and together == alone * 2

"""One contract, two runtimes: every operation of the API behaves the same over the in-process runtime and over
Ray actors (the sample conversation ingested through the API, then read back every way a user reads it)."""

from __future__ import annotations

import pytest
from tests.server.test_rest import AGENT, DISCUSSION, sample_conversations

from engram.api import types as t
from engram.api.errors import ApiError


class RuntimeContract:
    kind: str

    @pytest.fixture(scope="class")
    @classmethod
    def mem(cls, request, tmp_path_factory):
        from engram.config.service import load_service_config
        from engram.boot.embedded import Engram

        if cls.kind == "ray":
            request.getfixturevalue("ray_session")
            from engram.runtime.ray_runtime import RayRuntime

            make = RayRuntime
        else:
            from engram.runtime.inprocess import InProcessRuntime

            make = InProcessRuntime
        home = tmp_path_factory.mktemp(f"contract-{cls.kind}") / "home"
        home.mkdir()
        mem = Engram(make(load_service_config(home)).start())
        res = mem.append_conversations(AGENT, t.AppendConversationsRequest(conversations=sample_conversations()))
        assert res.results[0].appended == 45 and res.settings_recorded == 2
        assert mem.wait_idle(timeout=600)
        yield mem
        mem.close()

    def test_appending_the_same_messages_again_adds_nothing(self, mem):
        head = sum(mem.rt.heads().values())
        again = mem.append_conversations(AGENT, t.AppendConversationsRequest(conversations=sample_conversations()))
        assert [(r.appended, r.duplicates) for r in again.results] == [(0, 45)] and again.settings_recorded == 0
        assert sum(mem.rt.heads().values()) == head

    def test_sql_reads_the_log_and_the_projections_and_refuses_bad_queries(self, mem):
        res = mem.run_sql(t.SqlRequest(query="SELECT discussion_id, agent, messages FROM discussions"))
        assert res.columns == ["discussion_id", "agent", "messages"] and res.rows == [[DISCUSSION, AGENT, 45]]
        with pytest.raises(ApiError) as refused:
            mem.run_sql(t.SqlRequest(query="SELECT * FROM no_such_table"))
        assert refused.value.code == "bad_query"

    def test_status_shows_every_projection_and_policy_caught_up(self, mem):
        mem.wait_idle(timeout=120)
        shard = mem.status().shards[0]
        assert shard.projection_lag == 0 and shard.events_by_type["MessageAppended"] == 45
        assert {"summarizer#0", "auto-ingest", "trace-reader", "observer", "consolidator"} <= set(shard.consumers)
        assert all(pos == shard.head for pos in shard.consumers.values())
        assert shard.resident_agents == 1  # the one agent's memory, held by the shard's traces projection
        assert shard.projection_timings["traces"]["events"] > 0 and shard.projection_timings["traces"]["fold_s"] > 0

    def test_recall_ranks_traces_by_six_factors_and_names_their_sources(self, mem):
        res = mem.recall(AGENT, t.RecallRequest(query="Which CSS approach does Priya dislike?", discussion=DISCUSSION,
                                                limit=3))
        assert len(res.hits) == 3 and "CSS" in res.hits[0].content
        for hit in res.hits:
            assert set(hit.factors) == {"strength", "similarity", "recency", "emotional", "activation", "importance"}
            assert hit.score == pytest.approx(sum(hit.contributions.values()), abs=1e-5)
        assert any("CSS-in-JS" in s.content for s in res.hits[0].sources)

    def test_a_read_after_a_write_sees_it_in_every_read_model(self, mem):
        said = "The launch party is on a boat called Kestrel moored in Porto."
        written = mem.append_messages(AGENT, "after-write", t.AppendRequest(messages=[t.Message(role="user",
                                                                                               content=said)]))
        for read in ("recall", "log", "discussion", "memories"):
            mem.reach(AGENT, written.position, read, "after-write")
        assert any("Kestrel" in h.content for h in mem.recall(AGENT, t.RecallRequest(query="Which boat is the launch "
                                                                                      "party on?", record=False)).hits)
        assert [m.content for m in mem.list_messages(AGENT, "after-write").messages] == [said]
        assert "after-write" in [d.discussion for d in mem.list_discussions(AGENT).discussions]

    def test_agents_discussions_and_memories_are_listed(self, mem):
        (agent,) = [a for a in mem.list_agents().agents if a.agent == AGENT]
        assert agent.messages >= 45 and agent.discussions >= 1 and agent.traces > 0
        page = mem.list_messages(AGENT, DISCUSSION, limit=10)
        assert len(page.messages) == 10 and page.next_cursor == str(page.messages[-1].seq)
        assert mem.list_memories(AGENT, "traces", limit=5).memories

    def test_a_read_of_an_unknown_agent_is_refused_and_records_nothing(self, mem):
        mem.wait_idle(timeout=120)  # a recall's TraceRetrieved is appended after its answer left (the actor's flush)
        head = sum(mem.rt.heads().values())
        for read in (lambda: mem.recall("nobody", t.RecallRequest(query="x")), lambda: mem.traces("nobody"),
                     lambda: mem.working_memory("nobody"), lambda: mem.mood_history("nobody")):
            with pytest.raises(ApiError) as refused:
                read()
            assert refused.value.code == "unknown_agent"
        assert sum(mem.rt.heads().values()) == head

    def test_discussion_memory_is_read_and_searched(self, mem):
        memories = mem.memories(AGENT, DISCUSSION)
        assert memories.exists and memories.total >= 5
        found = mem.search(AGENT, DISCUSSION, t.SearchRequest(keywords="Supabase;deadline", mode="hybrid", limit=3))
        assert found.hits and found.mode == "hybrid"
        assert mem.discussion(DISCUSSION).agent == AGENT
        with pytest.raises(ApiError) as refused:
            mem.summary("someone-else", DISCUSSION)
        assert refused.value.code == "unknown_discussion"

    def test_mood_and_working_memory_notes_are_recorded(self, mem):
        mem.set_mood(AGENT, t.MoodRequest(valence=0.5, arousal=0.1, dominance=0.0, reason="contract"))
        assert mem.mood_history(AGENT).rows[-1][-1] == "contract"
        written = mem.write_working_memory(AGENT, t.WorkingMemoryWrite(markdown="## Notes\n- launch on March 12\n"))
        assert written.seq > 0 and not written.truncated
        assert mem.wait_idle(timeout=120)
        assert "launch on March 12" in mem.working_memory(AGENT).markdown

    def test_a_workflow_runs_on_the_discussion(self, mem):
        out = mem.run_workflow(AGENT, t.WorkflowRequest(nodes=[
            {"id": "recent", "type": "RecentMemorySummarizerTool"},
            {"id": "create", "type": "QualityMemory"}], discussion=DISCUSSION))
        assert [n.type for n in out.nodes] == ["RecentMemorySummarizerTool", "QualityMemory"]
        assert out.nodes[0].output

    def test_replay_verify_and_a_forget_are_jobs(self, mem):
        verify = mem.jobs.wait(mem.replay(t.ReplayRequest(verify=True)).id, timeout=600)
        assert verify.state == "succeeded" and verify.result == {"identical": True, "differences": []}
        mem.append_messages(AGENT, "secret", t.AppendRequest(messages=[t.Message(role="user", content="my PIN is 4711")]))
        forgot = mem.jobs.wait(mem.forget(AGENT, "secret", t.ForgetRequest(reason="contract")).id, timeout=600)
        assert forgot.state == "succeeded" and forgot.result["forgotten"] == "secret"
        assert mem.run_sql(t.SqlRequest(query="SELECT count(*) FROM messages WHERE content LIKE '%4711%'")).rows == [[0]]
        with pytest.raises(ApiError) as refused:
            mem.forget(AGENT, "never-was", t.ForgetRequest())
        assert refused.value.code == "unknown_discussion"


class TestInProcessRuntime(RuntimeContract):
    kind = "inprocess"


@pytest.mark.ray
class TestRayRuntime(RuntimeContract):
    kind = "ray"

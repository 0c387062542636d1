"""Issue 6, done when: a 100,000-token conversation passes through all of it with every threshold crossing
visible as events, and replay reproduces the same observations, traces, edges, observation log and
compaction chain with no LLM call.

The conversation (tests/memory/background/synthetic.py: 13 sessions over a month; facts, preferences, commitments,
corrections, emotions) goes through auto-ingest and the background processes on a real shard (DuckDB log
and projections), hosted by a PolicyHost in this process so that every memory-task call is counted. The
Observer runs at its real thresholds (30,000 tokens, buffering every 6,000); the Reflector's is lowered to
2,000 tokens so that it runs within 100,000 tokens (its 40,000 is pinned in test_reflector), and the
ContextCompactor compacts the discussion hierarchically in a 24,000-token window (the default 200,000 would
not be reached by 100,000 tokens). The agent starts
agreeable (the contradictions it reflects are kept) and turns honest after its second reflection (consolidation
then resolves the kept ones in favour of the newer side). The hashing
embedder keeps this test fast; the ONNX model is exercised by the Ray test and the benchmark.
"""

from __future__ import annotations

import pytest
from tests.memory.background.harness import BACKGROUND, Pipeline, services
from tests.memory.background.synthetic import HOUR_US, conversation

from engram.config.llm import EmbedderConfig
from engram.kernel.tokens import estimate_tokens
from engram.policies.auto_ingest import AutoIngest
from engram.policies.context_compactor import ContextCompactor
from engram.providers.embeddings import make_embedder

AGENT, DISCUSSION = "maya", "life"
REFLECTOR = 2_000
WINDOW = 24_000


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    svc = services(make_embedder(EmbedderConfig(name="hashing")))
    p = Pipeline(tmp_path_factory.mktemp("pipeline"), svc, policies=(AutoIngest,) + BACKGROUND + (ContextCompactor,))
    sessions = conversation(100_000)
    config = {"memory": {"reflector": {"activationTokens": REFLECTOR},
                         "infiniteContext": {"contextWindowTokens": WINDOW, "strategy": "hierarchical"}}}
    p.configure(AGENT, {**config, "personality": {"agreeableness": 0.8}}, sessions[0][0].ts_us - 1)
    honest = False
    for session in sessions:
        if not honest and len(p.events("Reflected")) >= 2:  # after the reflection that saw the corrections
            p.configure(AGENT, {**config, "personality": {"honesty": 0.8}}, session[0].ts_us - 1)
            honest = True
        p.say(AGENT, DISCUSSION, session)
        p.settle()
    p.sessions = sessions
    yield p
    p.close()


def rows(p, sql, params=None):
    return p.sql(sql, params)[1]


def test_the_conversation_holds_100000_tokens(pipeline):
    total = sum(estimate_tokens(m.content) for s in pipeline.sessions for m in s)
    assert total >= 100_000 and len(pipeline.sessions) > 10


def test_every_30000_tokens_the_buffered_notes_are_activated_without_observing_anything_twice(pipeline):
    recorded = rows(pipeline, "SELECT first_seq, last_seq, input_tokens, buffered FROM ev_observations_recorded ORDER BY seq")
    activated = rows(pipeline, "SELECT through_seq, unobserved_tokens, threshold, causation, increments FROM "
                               "ev_observations_activated ORDER BY seq")
    assert len(activated) == 3  # ~97,000 observed tokens: the threshold was crossed three times
    assert all(u > 30_000 and t == 30_000 and c is not None for _, u, t, c, _ in activated)
    assert all(b and tokens >= 6_000 for _, _, tokens, b in recorded)  # every increment was buffered
    assert all(a[1] < b[0] for a, b in zip(recorded, recorded[1:]))  # no message observed twice
    assert sum(inc for *_, inc in activated) == sum(1 for r in recorded if r[1] <= activated[-1][0])
    # Each crossing message is the first whose tokens took the unobserved total past 30,000.
    for through, unobserved, _, cause, _ in activated:
        (tokens,) = rows(pipeline, "SELECT token_estimate FROM messages WHERE seq = ?", [cause])[0]
        assert unobserved - tokens <= 30_000


def test_observation_compression_is_within_the_guides_5_to_40x(pipeline):
    ((compression, notes, active, buffered, reflected),) = rows(
        pipeline, "SELECT observation_compression, notes, active_notes, buffered_notes, reflected_notes FROM observation_logs")
    assert 5 <= compression <= 40
    assert notes == active + buffered + reflected and reflected > 0  # nothing is lost from the log


def test_the_reflector_runs_past_its_threshold_and_marks_what_it_consumed(pipeline):
    reflected = rows(pipeline, "SELECT input_tokens, threshold, causation, json_array_length(consumed_note_ids) FROM ev_reflected")
    assert reflected and all(tokens > REFLECTOR and threshold == REFLECTOR for tokens, threshold, _, _ in reflected)
    causes = {r[0] for r in rows(pipeline, "SELECT type FROM events WHERE seq IN (SELECT causation FROM ev_reflected)")}
    assert causes == {"ObservationsActivated"}
    ((marked,),) = rows(pipeline, "SELECT count(*) FROM observation_notes WHERE status IN ('reflected', 'superseded')")
    assert marked == sum(n for *_, n in reflected)
    sources = {r[0] for r in rows(pipeline, "SELECT DISTINCT source_type FROM memory_traces WHERE 'reflection' = ANY(tags)")}
    assert sources <= {"observation", "reflection"} and sources


def test_consolidation_runs_only_where_something_is_due_and_each_step_leaves_events(pipeline):
    # The clock starts at the first message and follows the traces made from the conversation.
    ((first, last),) = rows(pipeline, "SELECT (SELECT min(epoch_us(ts)) FROM messages), max(epoch_us(ts)) FROM "
                                      "ev_trace_encoded WHERE source_type IN ('user_statement', 'agent_inference')")
    hours = len(range((first // HOUR_US + 1) * HOUR_US, last + 1, HOUR_US))
    ((ticks, runs, busy),) = rows(pipeline, "SELECT (SELECT count(*) FROM ev_clock_tick), (SELECT count(*) FROM "
                                            "ev_consolidation_ran), (SELECT sum(runs) FROM ev_consolidation_ran)")
    # One tick per advance of the agent's time past a boundary, one report per tick; work only at the
    # boundaries where something fell due: fewer than the hours that passed.
    assert ticks == runs and 0 < ticks <= hours and 0 < busy < hours
    assert rows(pipeline, "SELECT count(*) FROM ev_clock_tick WHERE epoch_us(ts) % ? <> 0", [HOUR_US])[0][0] == 0
    by_tick = dict(rows(pipeline, "SELECT e.type, count(*) FROM events e JOIN ev_clock_tick t ON e.causation = t.seq "
                                  "GROUP BY e.type"))
    # Edges and reviews (one event per boundary and discussion, `engram.events.compact`) as SQL lists them: one row each.
    ((edges, reviews),) = rows(pipeline, "SELECT (SELECT count(*) FROM ev_edge_added e JOIN ev_clock_tick t ON e.causation = "
                                         "t.seq), (SELECT count(*) FROM ev_trace_reinforced r JOIN ev_clock_tick t ON "
                                         "r.causation = t.seq)")
    assert by_tick["TracePruned"] > 0 and reviews > 0 and by_tick["SchemaCreated"] > 0
    assert edges > 0 and by_tick["ConflictResolved"] > 0 and by_tick["ConsolidationRan"] == runs
    # The agreeable half kept contradictions; once honest, consolidation preferred the newer side.
    resolutions = dict(rows(pipeline, "SELECT resolution, count(*) FROM ev_conflict_resolved GROUP BY ALL"))
    assert resolutions.get("keep_both", 0) > 0 and resolutions.get("prefer_newer", 0) > 0
    ((pruned, weakest),) = rows(pipeline, "SELECT count(*), max(strength) FROM ev_trace_pruned")
    assert pruned > 0 and weakest < 0.05
    assert all(b == "[]" for (b,) in rows(pipeline, "SELECT bounded FROM ev_consolidation_ran"))


def test_the_context_is_compacted_past_75_percent_of_the_window_and_the_chain_merges_upward(pipeline):
    compactions = rows(pipeline, "SELECT trigger, level, context_tokens_before, first_turn, last_turn FROM "
                                 "ev_context_compacted ORDER BY seq")
    threshold = [c for c in compactions if c[0] == "threshold"]
    assert len(threshold) >= 3 and all(c[2] > 0.75 * WINDOW for c in threshold)
    assert any(c[0] == "chain" and c[1] >= 1 for c in compactions)  # maxSummaryChainTokens passed: L0 -> L1
    total_turns = sum(len(s) for s in pipeline.sessions)
    assert max(c[4] for c in threshold) <= total_turns - 20  # the last 20 turns are never compacted
    ((chain,),) = rows(pipeline, "SELECT count(*) FROM context_compactions WHERE in_chain")
    assert chain >= 1


def test_replay_reproduces_observations_traces_edges_and_the_log_file_with_no_llm_call(pipeline):
    tasks = pipeline.services["tasks"]
    live_calls = dict(tasks.calls)
    ((recorded, reflections, schemas),) = rows(
        pipeline, "SELECT (SELECT count(*) FROM ev_observations_recorded), (SELECT count(*) FROM ev_reflected), "
                  "(SELECT count(*) FROM ev_schema_created)")
    assert live_calls["observe"] == recorded and live_calls["reflect"] == reflections
    assert live_calls["summarize_schema"] >= schemas
    log_file = pipeline.root / "projections" / "agents" / AGENT / "Public" / f"{DISCUSSION}_observations.md"
    text = log_file.read_text()
    assert "## Reflections (long-term traces)\n\nDate: 2026-" in text and "\n- (semantic, from " in text
    assert pipeline.shard.verify_replay() == []  # files byte for byte, tables row for row
    assert tasks.calls == live_calls  # replay called no memory task

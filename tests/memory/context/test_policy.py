"""The ContextCompactor policy on a real log and projection database (one shard, no Ray)."""

from __future__ import annotations

import msgspec
import pytest
from tests.memory.context.helpers import CountingTasks, LocalContext, MINUTE_US, T0, conversation

from engram.events.background import ContextCompacted, ObservationNote, ObservationsRecorded
from engram.events.envelope import NewEvent, Write
from engram.events.provenance import LlmCall
from engram.policies.context_compactor import ContextCompactor
from engram.policies.host import PolicyHost

SMALL = {"memory": {"infiniteContext": {"contextWindowTokens": 2_000}}}


@pytest.fixture
def local(tmp_path):
    engines = []

    def make(agent_config=SMALL, root=None, tasks=None):
        engine = LocalContext(root or tmp_path / f"home{len(engines)}", tasks=tasks, agent_config=agent_config)
        engines.append(engine)
        return engine

    yield make
    for e in engines:
        e.close()


def decisions(engine):
    """What was decided, without the measured parts (LLM latency)."""
    return [
        (r.seq, r.causation, r.event_id, r.ts_us, msgspec.structs.replace(r.event, llm=tuple(c.task for c in r.event.llm)))
        for r in engine.events()
    ]


def test_a_message_past_the_threshold_is_compacted_with_its_event_time_and_causation(local):
    engine = local()
    messages = conversation(60)
    engine.append(messages)
    recs = engine.events()
    assert recs and all(isinstance(r.event, ContextCompacted) for r in recs)
    msgs = {r.seq: r for r in engine.events("MessageAppended")}
    for r in recs:
        trigger = msgs[r.causation]
        assert r.ts_us == trigger.ts_us  # the event time of the message that passed the threshold
        assert r.event_id == f"compaction:d:{r.event.node_id}"
        assert r.event.last_seq <= trigger.seq - 20
    names, rows = engine.sql(
        "SELECT node_id, in_chain, parent, first_turn, last_turn, messages, compression_ratio FROM context_compactions "
        "ORDER BY seq")
    assert [r[0] for r in rows] == [r.event.node_id for r in recs]
    assert [r[1] for r in rows] == [False] * (len(rows) - 1) + [True]  # sliding: the last rolling summary stands
    assert rows[-1][3] == 1 and rows[-1][2] is None
    assert all(r[6] > 1 for r in rows)


def test_decisions_do_not_depend_on_how_the_messages_were_batched(local, tmp_path):
    messages = conversation(90)
    one = local({"memory": {"infiniteContext": {"contextWindowTokens": 2_000, "strategy": "hierarchical",
                                                "maxSummaryChainTokens": 100}}})
    one.append(messages, one_by_one=True)
    both = local({"memory": {"infiniteContext": {"contextWindowTokens": 2_000, "strategy": "hierarchical",
                                                 "maxSummaryChainTokens": 100}}})
    both.append(messages, one_by_one=False)
    def by_turn(engine):
        # Seqs differ (live, the compactions sit between the messages): name triggers by message id, nodes by turns.
        ids = {r.seq: r.event.message_id for r in engine.events("MessageAppended")}
        return [
            (ids[r.causation], r.ts_us, e.level, e.first_turn, e.last_turn, e.trigger, e.summary, e.input_tokens,
             e.output_tokens, len(e.children), e.dropped_count, e.preserved_entities)
            for r in engine.events() for e in [r.event]
        ]

    a, b = by_turn(one), by_turn(both)
    assert a == b and any(d[5] == "chain" for d in a)


def test_a_restart_without_its_state_adopts_the_recorded_compactions_without_calling_the_llm(local):
    engine = local()
    engine.append(conversation(80))
    assert engine.tasks.total > 0
    head = engine.shard.head()
    fresh_tasks = CountingTasks()
    engine.services["tasks"] = fresh_tasks
    restarted = ContextCompactor(engine.ctx)  # no snapshot: re-reads the whole log
    host = PolicyHost([restarted], read=engine.shard.read, append=engine.shard.append_many, head=engine.shard.head,
                      state_dir=None)
    host.run_until_caught_up()
    assert fresh_tasks.total == 0
    assert engine.shard.head() == head  # nothing appended again
    before, after = engine.policy.discussions[("a", "d")], restarted.discussions[("a", "d")]
    assert [n.node_id for n in after.chain] == [n.node_id for n in before.chain]
    assert after.raw == before.raw and after.turns == before.turns == 80


def test_replay_rebuilds_the_chain_row_for_row_without_an_llm_call(local):
    engine = local({"memory": {"infiniteContext": {"contextWindowTokens": 2_000, "strategy": "hierarchical",
                                                   "maxSummaryChainTokens": 100}}})
    engine.append(conversation(120))
    calls = engine.tasks.total
    _, live = engine.sql("SELECT * FROM context_compactions ORDER BY seq, node_id")
    assert len(live) > 5 and any(row[8] == "chain" for row in live)
    assert engine.shard.verify_replay() == []
    assert engine.tasks.total == calls  # replay folds the recorded events only


def test_lowering_the_window_compacts_at_once(local):
    engine = local(agent_config=None)
    engine.append(conversation(45))
    assert engine.events() == []  # 45 short turns are nowhere near 75% of 200,000 tokens
    engine.set_config(SMALL, T0 + 50 * MINUTE_US)
    engine.settle()
    recs = engine.events()
    assert len(recs) == 1
    settings = engine.events("SettingsChanged", stream="agent:a")[-1]
    assert recs[0].causation == settings.seq and recs[0].ts_us == settings.ts_us
    assert recs[0].event.last_turn == 25  # all but the last 20 of 45


def test_forgetting_a_discussion_or_the_agent_drops_their_contexts_and_chains(local):
    engine = local()
    engine.append(conversation(60))
    engine.append(conversation(60), discussion="e")
    assert {("a", "d"), ("a", "e")} <= set(engine.policy.discussions)  # (agent, discussion id)
    engine.shard.forget("a", "d")
    engine.settle()
    assert ("a", "d") not in engine.policy.discussions and ("a", "e") in engine.policy.discussions
    assert engine.sql("SELECT DISTINCT discussion_id FROM context_compactions")[1] == [("e",)]
    engine.shard.forget("a")
    engine.settle()
    assert engine.policy.discussions == {}
    assert engine.sql("SELECT count(*) FROM context_compactions")[1] == [(0,)]


def test_hybrid_reuses_the_notes_the_observer_recorded_and_appends_the_traces_it_elevates(local):
    engine = local({"memory": {"infiniteContext": {"contextWindowTokens": 4_000, "strategy": "hybrid"}}})
    messages = conversation(100)
    engine.append(messages[:10])
    note = ObservationNote(note_id="obs-1", type="preference", text="Priya prefers Tailwind over CSS-in-JS.",
                           importance=0.9, observed_us=T0, source_seqs=(4,), entities=("Priya",))
    llm = LlmCall(provider="offline", model="offline-heuristic-v1", task="observe", prompt_hash="h")
    observed = ObservationsRecorded(notes=(note,), first_seq=3, last_seq=12, input_tokens=600, output_tokens=10,
                                    buffered=True, llm=llm)
    engine.write([Write("d", "a", (NewEvent(observed, T0 + 10 * MINUTE_US, event_id="observer:test"),))])
    engine.append(messages[10:])
    first = engine.events()[0]
    assert first.event.strategy == "hybrid"
    assert first.event.notes_reused == 1 and "Priya prefers Tailwind over CSS-in-JS." in first.event.summary
    traces = [r for r in engine.events("TraceEncoded") if r.causation == first.causation]
    assert [r.event.trace_id for r in traces] == list(first.event.traces_created)
    assert all(r.event.source_type == "reflection" and r.event_id == f"trace:{r.event.trace_id}" for r in traces)
    assert "obs-1" not in str([r.event for r in traces])  # the Observer's own note is the Reflector's to elevate


def test_a_conscientious_agent_compacts_more_often_with_the_threshold_divided_by_the_stated_frequency(local):
    from engram.config import defaults as d
    from engram.config.agent import AgentConfig
    from engram.memory.context.rules import effective, threshold_tokens

    steady = local()
    steady.append(conversation(160))
    conscientious = local({**SMALL, "personality": {"conscientiousness": 0.8}})
    conscientious.append(conversation(160))
    # The guide's row: conscientiousness > 0.6 -> increase compaction frequency (1.5x: 0.75 of the window -> 0.5).
    assert d.CONSCIENTIOUSNESS_COMPACTION_FREQUENCY == 1.5
    cfg = AgentConfig.model_validate({**SMALL, "personality": {"conscientiousness": 0.8}})
    assert threshold_tokens(effective(cfg)) == 1_000
    assert threshold_tokens(effective(AgentConfig.model_validate(SMALL))) == 1_500
    assert effective(AgentConfig.model_validate({**SMALL, "personality": {"conscientiousness": 0.6}})).compaction_threshold == 0.75
    n, m = len(steady.events()), len(conscientious.events())
    assert n >= 2 and m >= 1.3 * n
    first = {e: min(r.causation for r in eng.events()) for e, eng in (("steady", steady), ("conscientious", conscientious))}
    assert first["conscientious"] < first["steady"]  # the first compaction comes earlier

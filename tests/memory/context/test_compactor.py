"""Each strategy on the pure core with the offline provider: what a compaction makes, and what it leaves raw."""

from __future__ import annotations

import msgspec
import pytest
from tests.memory.context.helpers import CountingTasks, config, conversation, lines_of, run_pure

from engram.events.background import ContextCompacted, ObservationNote, ObservationsRecorded
from engram.events.provenance import LlmCall
from engram.kernel.tokens import estimate_tokens
from engram.memory.context.chain import ChainNode, DiscussionContext
from engram.memory.context.compactor import Compactor
from engram.memory.context.hybrid import recorded_for_span
from engram.memory.context.rules import merge_runs, summary_target, threshold_tokens


@pytest.mark.parametrize("strategy", ["sliding", "hierarchical", "hybrid"])
def test_no_strategy_compacts_the_last_twenty_turns_and_each_brings_the_context_under_the_threshold(strategy):
    cfg = config(strategy=strategy, contextWindowTokens=2_000, maxSummaryChainTokens=150)
    messages = conversation(160)
    ctx, events = run_pure(messages, cfg)
    assert events, "a 160-turn conversation passes 1,500 tokens"
    for trigger_seq, ev in events:
        assert ev.last_seq <= trigger_seq - 20  # the node stands only for turns before the last 20
        assert ev.window_tokens == 2_000
    leaves = [ev for _, ev in events if ev.trigger == "threshold"]
    for ev in leaves:
        assert ev.context_tokens_before > threshold_tokens(cfg.memory.infinite_context)
    # After each threshold compaction exactly the last 20 turns stay raw (every older one was compacted).
    assert len(ctx.raw) <= len(messages) - events[-1][0] + 20
    assert ctx.covered_through == max(ev.last_seq for _, ev in events)
    assert ctx.context_tokens < ctx.covered_tokens + ctx.raw_tokens


def test_sliding_keeps_one_rolling_summary_that_absorbs_the_previous_one():
    cfg = config(strategy="sliding", contextWindowTokens=2_000)
    ctx, events = run_pure(conversation(120), cfg)
    assert len(events) >= 3
    previous = None
    for _, ev in events:
        assert ev.strategy == "sliding" and ev.level == 0 and ev.trigger == "threshold"
        assert ev.children == ((previous.node_id,) if previous else ())
        assert ev.first_turn == 1  # the rolling summary stands for everything compacted so far
        if previous:
            assert ev.first_seq == 1 and ev.last_seq > previous.last_seq
            assert ev.input_tokens == previous.output_tokens + sum(
                estimate_tokens(m.content) for m in conversation(120)[previous.last_seq : ev.last_seq])
        previous = ev
    assert [n.node_id for n in ctx.chain] == [events[-1][1].node_id]
    assert len(ctx.raw) >= 20


def test_hierarchical_merges_the_oldest_nodes_upward_when_the_chain_passes_its_budget():
    cfg = config(strategy="hierarchical", contextWindowTokens=2_000, maxSummaryChainTokens=120)
    ctx, events = run_pure(conversation(400), cfg)
    merges = [ev for _, ev in events if ev.trigger == "chain"]
    assert merges, "the L0 nodes pass 120 tokens"
    seen: dict[str, ContextCompacted] = {}
    chain: list[str] = []
    for _, ev in events:
        if ev.trigger == "chain":
            kids = [seen[k] for k in ev.children]
            assert len(kids) >= 2
            start = chain.index(ev.children[0])
            assert ev.children == tuple(chain[start : start + len(kids)])  # neighbours in the chain
            assert len({k.level for k in kids}) == 1 or len(kids) == 2
            # Every older run of one level was left alone only because merging it could not shorten it any
            # more (1000x of its turns).
            ic = cfg.memory.infinite_context
            nodes = [seen[n] for n in chain]
            for run in merge_runs([_as_node(n) for n in nodes], ic):
                if run[0].first_seq >= kids[0].first_seq:
                    break
                tokens = sum(n.tokens for n in run)
                assert summary_target(tokens, sum(n.covered_tokens for n in run), ic) >= tokens
            assert sum(k.output_tokens for k in kids) > 120 or sum(seen[n].output_tokens for n in chain) > 120
            assert ev.output_tokens < ev.input_tokens == sum(k.output_tokens for k in kids)
            chain = chain[:start] + [ev.node_id] + chain[start + len(kids):]
        else:
            assert ev.level == 0 and ev.messages > 0
            chain.append(ev.node_id)
        seen[ev.node_id] = ev
    assert chain == [n.node_id for n in ctx.chain]
    assert max(ev.level for _, ev in events) == 2  # L0 -> L1 -> L2
    assert ctx.chain_tokens <= 120
    # Up to 1000x: no node is asked for fewer tokens than a thousandth of the raw turns it stands for.
    assert all(ev.target_tokens >= -(-ev.covered_tokens // 1000) for _, ev in events)
    # The tree's compression: the raw tokens the chain stands for over the chain's tokens.
    assert ctx.covered_tokens / ctx.chain_tokens > 50


def _as_node(ev: ContextCompacted) -> ChainNode:
    return ChainNode.of(ev)


def test_the_target_ratio_steers_how_long_a_summary_is():
    messages = conversation(60)
    lengths = {}
    for ratio in (4, 8, 16):
        _, events = run_pure(messages, config(strategy="hierarchical", contextWindowTokens=2_000, targetCompressionRatio=ratio))
        first = events[0][1]
        assert first.target_tokens == -(-first.input_tokens // ratio)
        assert first.output_tokens <= first.target_tokens
        lengths[ratio] = first.output_tokens
    assert lengths[4] > lengths[8] > lengths[16]
    assert lengths[8] >= 0.8 * events[0][1].input_tokens / 8


def test_transparency_levels_keep_what_they_promise():
    messages = conversation(60)
    by_level = {}
    for level in ("full", "summary", "none"):
        _, events = run_pure(messages, config(strategy="sliding", contextWindowTokens=2_000, transparencyLevel=level))
        by_level[level] = events[0][1]
    full, summary, none = by_level["full"], by_level["summary"], by_level["none"]
    assert full.transparency == "full" and full.dropped and full.dropped_count == len(full.dropped)
    assert all(m.startswith("m") for m in full.dropped)  # message ids: their text stays in the log
    assert full.preserved_entities and full.context_tokens_before > full.context_tokens_after > 0
    assert summary.dropped == () and summary.dropped_count == full.dropped_count
    assert summary.preserved_entities == full.preserved_entities
    assert none.dropped == () and none.dropped_count == 0 and none.preserved_entities == ()
    assert none.duration_ms == 0 and none.context_tokens_before == 0
    # Whatever the level, the chain is the same.
    chain = lambda e: (e.node_id, e.summary, e.input_tokens, e.output_tokens, e.first_seq, e.last_seq, e.children)
    assert chain(full) == chain(summary) == chain(none)
    assert [c.task for c in full.llm] == [c.task for c in none.llm] == ["compact"]


def test_duration_is_measured_around_the_work():
    ticks = iter([0.0, 0.25, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5])
    cfg = config(strategy="sliding", contextWindowTokens=2_000)
    messages = conversation(40)
    lines = lines_of(messages)
    ctx = DiscussionContext("a", "d")
    for seq in lines:
        ctx.add_message(seq, estimate_tokens(lines[seq].content))
    from engram.memory.context.rules import due

    span = due(ctx, cfg.memory.infinite_context)
    out = Compactor(CountingTasks(), clock=lambda: next(ticks)).compact(ctx, span, [lines[t.seq] for t in span], cfg)
    assert out.events[0].duration_ms == 250.0


def _note(seq: int, text: str, importance: float = 0.8) -> ObservationNote:
    return ObservationNote(note_id=f"obs-{seq}", type="factual", text=text, importance=importance,
                           observed_us=conversation(1)[0].ts_us, source_seqs=(seq,), entities=("Priya Raman",))


def test_hybrid_reuses_the_observers_notes_observes_the_rest_and_elevates_only_its_own_notes():
    cfg = config(strategy="hybrid", contextWindowTokens=4_000)
    llm = LlmCall(provider="offline", model="offline-heuristic-v1", task="observe", prompt_hash="x")
    recorded = ObservationsRecorded(
        notes=(_note(1, "Priya Raman is building Acme Dashboard with Supabase auth."),
               _note(2, "Marco Bianchi owns the Postgres schema.")),
        first_seq=1, last_seq=10, input_tokens=500, output_tokens=30, buffered=False, llm=llm,
    )
    seen_spans = []

    def notes(span):
        seen_spans.append([t.seq for t in span])
        return recorded_for_span([recorded], [t.seq for t in span])

    tasks = CountingTasks()
    observed_inputs = []
    original = tasks.observe
    tasks.observe = lambda lines, **kw: (observed_inputs.append([l.seq for l in lines]), original(lines, **kw))[1]
    ctx, events = run_pure(conversation(100), cfg, tasks, notes=notes)
    first = events[0][1]
    assert first.strategy == "hybrid" and first.level == 0
    assert first.notes_reused == 2 and first.notes_observed > 0
    assert observed_inputs[0] == [s for s in seen_spans[0] if s > 10]  # only what no recorded event observed
    assert first.summary.startswith("Observations:\nDate: 2026-03-02\n- ")
    assert "Priya Raman is building Acme Dashboard" in first.summary
    assert "\nNarrative: " in first.summary
    assert first.output_tokens <= first.target_tokens + 1
    assert {"observe", "reflect", "compact"} <= set(tasks.calls)
    assert [c.task for c in first.llm] == ["observe", "reflect", "compact"]
    assert first.traces_created  # facts of the notes it observed itself
    later = [ev for _, ev in events[1:] if ev.trigger == "threshold"]
    assert later and all(ev.notes_reused == 0 for ev in later)


def test_hybrid_traces_carry_provenance_to_the_compacted_messages():
    from engram.memory.context.rules import due

    cfg = config(strategy="hybrid", contextWindowTokens=4_000)
    messages = conversation(80)
    lines = lines_of(messages)
    ctx = DiscussionContext("a", "d")
    out = None
    for seq, line in lines.items():
        ctx.add_message(seq, estimate_tokens(line.content))
        span = due(ctx, cfg.memory.infinite_context)
        if span:
            out = Compactor(CountingTasks(), clock=lambda: 0.0).compact(ctx, span, [lines[t.seq] for t in span], cfg,
                                                                         ts_us=line.ts_us)
            break
    assert out.traces
    node = out.events[0]
    assert [t.trace_id for t in out.traces] == list(node.traces_created)
    for t in out.traces:
        assert t.source_type == "reflection" and t.scope == "discussion" and t.scope_id == "d"
        assert t.source_seqs and all(node.first_seq <= s <= node.last_seq for s in t.source_seqs)
        assert t.source_message_ids == tuple(f"m{s}" for s in t.source_seqs)
        assert "compaction" in t.tags and t.importance >= 0.4


def test_a_compaction_is_the_same_whatever_runs_it_twice():
    cfg = config(strategy="hierarchical", contextWindowTokens=2_000, maxSummaryChainTokens=120)
    _, a = run_pure(conversation(200), cfg)
    _, b = run_pure(conversation(200), cfg)
    strip = lambda evs: [(s, msgspec.structs.replace(e, llm=())) for s, e in evs]
    assert strip(a) == strip(b)

"""One compaction: the memory-task calls of a strategy, and the `ContextCompacted` events they make.

`Compactor.compact` takes a discussion's context (not modified), the turns due (`rules.due`), their
messages as chat lines, and the agent's recorded configuration; it returns the events, in order:
the node that replaces the turns, then the merges the chain budget asks for (hierarchical, hybrid),
plus the `TraceEncoded` events of a hybrid reflection. Applying them to the context in order gives
the chain the compaction decided on. The clock only measures durations (recorded, never decided on).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

import msgspec

from engram.config.agent import AgentConfig, InfiniteContext
from engram.events.background import ContextCompacted, ObservationNote
from engram.events.cognitive import TraceEncoded
from engram.events.provenance import LlmCall
from engram.kernel.tokens import estimate_tokens
from engram.memory.cognitive import llm_bridge
from engram.memory.cognitive.encoding import encode, trace_id
from engram.memory.cognitive.model import TRACE_TYPES
from engram.memory.cognitive.personality import Pad
from engram.memory.context import hybrid, rules
from engram.memory.context.chain import ChainNode, DiscussionContext, Turn
from engram.memory.context.transparency import at_level
from engram.providers.llm.types import ChatLine, TraceCandidate

if TYPE_CHECKING:
    from engram.providers.llm.tasks import MemoryTasks

# A merged child counts as dropped when less than this share of its words is in the merged summary.
CARRIED_WORDS = 0.5
# Auto-ingest categories of traces elevated from notes, by note type.
CATEGORY_OF_NOTE = {
    "factual": "knowledge",
    "preference": "user_preference",
    "commitment": "action_item",
    "correction": "correction",
    "emotional": "emotional_context",
    "creative": "episodic",
}
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]{3,}")


@dataclass
class Outcome:
    events: list[ContextCompacted] = field(default_factory=list)
    traces: list[TraceEncoded] = field(default_factory=list)


class Compactor:
    def __init__(self, tasks: MemoryTasks, clock: Callable[[], float] = time.perf_counter) -> None:
        self.tasks = tasks
        self._clock = clock

    def compact(
        self,
        ctx: DiscussionContext,
        span: Sequence[Turn],
        lines: Sequence[ChatLine],
        config: AgentConfig,
        *,
        recorded: hybrid.RecordedNotes = hybrid.RecordedNotes(),
        mood: Pad | None = None,
        ts_us: int = 0,
    ) -> Outcome:
        if not span:
            raise ValueError("nothing to compact")
        if [line.seq for line in lines] != [t.seq for t in span]:
            raise ValueError("the chat lines are not the messages of the span")
        ic = config.memory.infinite_context
        work = ctx.copy()
        out = Outcome()
        started = self._clock()
        before = work.context_tokens
        if ic.strategy == "sliding":
            leaf = self._sliding(work, span, lines, ic)
        elif ic.strategy == "hierarchical":
            leaf = self._leaf(span, lines, ic)
        else:
            leaf, out.traces = self._hybrid(work, span, lines, config, recorded, mood or Pad.of(config.mood), ts_us)
        work.apply(leaf, ts_us)
        out.events.append(self._finish(leaf, ic, before, work, started))
        if ic.strategy != "sliding":
            while True:
                started = self._clock()
                merged = next((m for m in map(lambda run: self._merge(run, ic), rules.merge_runs(work.chain, ic))
                               if m is not None), None)
                if merged is None:
                    break
                before = work.context_tokens
                work.apply(merged, ts_us)
                out.events.append(self._finish(merged, ic, before, work, started))
        return out

    def _finish(self, ev: ContextCompacted, ic: InfiniteContext, before: int, work: DiscussionContext,
                started: float) -> ContextCompacted:
        ev = msgspec.structs.replace(
            ev, context_tokens_before=before, context_tokens_after=work.context_tokens, window_tokens=ic.context_window_tokens,
            duration_ms=round((self._clock() - started) * 1000.0, 3),
        )
        return at_level(ev, ic.transparency_level)

    # ------------------------------------------------------------------ strategies

    def _sliding(self, work: DiscussionContext, span: Sequence[Turn], lines: Sequence[ChatLine],
                 ic: InfiniteContext) -> ContextCompacted:
        """One rolling summary: the previous one(s) and the span, re-summarised together."""
        prev = list(work.chain)
        prev_tokens = sum(n.tokens for n in prev)
        span_tokens = sum(t.tokens for t in span)
        covered = sum(n.covered_tokens for n in prev) + span_tokens
        target = rules.sliding_target(prev_tokens, span_tokens, covered, ic)
        result = self.tasks.compact(lines, target_tokens=target, previous_summary="\n".join(n.summary for n in prev))
        level = max((n.level for n in prev), default=0)
        first_seq = min([span[0].seq] + [n.first_seq for n in prev])
        first_turn = min([span[0].turn] + [n.first_turn for n in prev])
        return self._node(
            "sliding", level, first_seq, span[-1].seq, first_turn, span[-1].turn, result.value.summary,
            input_tokens=prev_tokens + span_tokens, covered=covered, target=target, children=tuple(n.node_id for n in prev),
            messages=len(span), dropped=result.value.dropped, entities=result.value.preserved_entities, llm=(result.llm,),
        )

    def _leaf(self, span: Sequence[Turn], lines: Sequence[ChatLine], ic: InfiniteContext) -> ContextCompacted:
        """An L0 node of the span."""
        span_tokens = sum(t.tokens for t in span)
        target = rules.summary_target(span_tokens, span_tokens, ic)
        result = self.tasks.compact(lines, target_tokens=target)
        return self._node(
            "hierarchical", 0, span[0].seq, span[-1].seq, span[0].turn, span[-1].turn, result.value.summary,
            input_tokens=span_tokens, covered=span_tokens, target=target, messages=len(span),
            dropped=result.value.dropped, entities=result.value.preserved_entities, llm=(result.llm,),
        )

    def _hybrid(self, work: DiscussionContext, span: Sequence[Turn], lines: Sequence[ChatLine], config: AgentConfig,
                recorded: hybrid.RecordedNotes, mood: Pad, ts_us: int) -> tuple[ContextCompacted, list[TraceEncoded]]:
        ic = config.memory.infinite_context
        calls: list[LlmCall] = []
        uncovered = [line for line in lines if line.seq not in recorded.covered]
        own: tuple[ObservationNote, ...] = ()
        if uncovered:
            observed = self.tasks.observe(uncovered, personality=config.personality)
            calls.append(observed.llm)
            own = tuple(observed.value)
        notes = tuple(recorded.notes) + own
        superseded: set[str] = set()
        candidates: tuple[TraceCandidate, ...] = ()
        reflect_llm = None
        if notes:
            reflection = self.tasks.reflect(notes, personality=config.personality)
            calls.append(reflection.llm)
            reflect_llm = reflection.llm
            superseded = set(reflection.value.superseded)
            candidates = reflection.value.traces
        kept = [n for n in notes if n.note_id not in superseded]
        span_tokens = sum(t.tokens for t in span)
        target = rules.summary_target(span_tokens, span_tokens, ic)
        chosen = hybrid.select_notes(kept, int(target * hybrid.HYBRID_NOTES_SHARE))
        block = hybrid.render_notes(chosen)
        # What the narrative may take: the target less the notes, its heading and the line break.
        frame = hybrid.hybrid_summary(block, "") + ("\n" if block else "") + hybrid.NARRATIVE_HEADING + " "
        narrative = self.tasks.compact(lines, target_tokens=max(1, target - estimate_tokens(frame)))
        calls.append(narrative.llm)
        summary = hybrid.hybrid_summary(block, narrative.value.summary)
        noted = {s for n in chosen for s in n.source_seqs}
        ids_by_seq = {line.seq: line.message_id for line in lines}
        noted_ids = {ids_by_seq[s] for s in noted if s in ids_by_seq}
        dropped = tuple(m for m in narrative.value.dropped if m not in noted_ids)
        entities = tuple(dict.fromkeys(list(narrative.value.preserved_entities) + [e for n in chosen for e in n.entities]))
        node = self._node(
            "hybrid", 0, span[0].seq, span[-1].seq, span[0].turn, span[-1].turn, summary,
            input_tokens=span_tokens, covered=span_tokens, target=target, messages=len(span), dropped=dropped,
            entities=entities, llm=tuple(calls),
        )
        traces = self._elevate(work, node, candidates, {n.note_id: n for n in own}, superseded, ids_by_seq, config, mood,
                               reflect_llm)
        node = msgspec.structs.replace(
            node, traces_created=tuple(t.trace_id for t in traces), notes_reused=len(recorded.notes), notes_observed=len(own)
        )
        return node, traces

    def _elevate(self, work: DiscussionContext, node: ContextCompacted, candidates: Sequence[TraceCandidate],
                 own_notes: dict[str, ObservationNote], superseded: set[str], ids_by_seq: dict[int, str],
                 config: AgentConfig, mood: Pad, llm: LlmCall | None) -> list[TraceEncoded]:
        """Traces of the reflection's candidates made only from notes this compaction observed."""
        threshold = config.storage.auto_ingest.importance_threshold
        traces: list[TraceEncoded] = []
        for i, c in enumerate(candidates):
            sources = [own_notes[nid] for nid in c.source_note_ids if nid in own_notes]
            if not sources or len(sources) < len(c.source_note_ids) or c.importance < threshold:
                continue
            if any(nid in superseded for nid in c.source_note_ids):
                continue
            seqs = tuple(sorted(set(c.source_seqs) | {s for n in sources for s in n.source_seqs}))
            tid = trace_id(work.agent, work.discussion, node.node_id, i, c.content)
            traces.append(
                encode(
                    trace_id=tid, content=c.content, config=config, mood=mood, scope="discussion",
                    scope_id=work.discussion, source_type="reflection", source_seqs=seqs,
                    source_message_ids=tuple(ids_by_seq[s] for s in seqs if s in ids_by_seq),
                    trace_type=c.trace_type if c.trace_type in TRACE_TYPES else "semantic",
                    category=CATEGORY_OF_NOTE.get(sources[0].type, ""), importance=c.importance,
                    confidence=c.confidence, entities=tuple(c.entities), tags=("compaction", "hybrid", *c.tags),
                    emotion=llm_bridge.emotion(c.content), llm=llm,
                )
            )
        return traces

    def _merge(self, run: list[ChainNode], ic: InfiniteContext) -> ContextCompacted | None:
        """The oldest nodes merged one level up (None when merging would not shorten them)."""
        inp = sum(n.tokens for n in run)
        covered = sum(n.covered_tokens for n in run)
        target = rules.summary_target(inp, covered, ic)
        if target >= inp:
            return None
        result = self.tasks.merge_summary(run[0].summary, [n.summary for n in run[1:]], max_tokens=target)
        summary = result.value
        words = set(_WORD.findall(summary.lower()))
        dropped = tuple(n.node_id for n in run if _carried(n.summary, words) < CARRIED_WORDS)
        lowered = summary.lower()
        entities = tuple(dict.fromkeys(e for n in run for e in n.entities if e.lower() in lowered))
        return self._node(
            ic.strategy, rules.merged_level(run), run[0].first_seq, run[-1].last_seq, run[0].first_turn,
            run[-1].last_turn, summary, input_tokens=inp, covered=covered, target=target,
            children=tuple(n.node_id for n in run), trigger="chain", dropped=dropped, entities=entities, llm=(result.llm,),
        )

    @staticmethod
    def _node(strategy: str, level: int, first_seq: int, last_seq: int, first_turn: int, last_turn: int, summary: str, *,
              input_tokens: int, covered: int, target: int, children: Sequence[str] = (), messages: int = 0,
              trigger: str = "threshold", dropped: Sequence[str] = (), entities: Sequence[str] = (),
              llm: Sequence[LlmCall] = ()) -> ContextCompacted:
        return ContextCompacted(
            node_id=rules.node_id(strategy, level, first_seq, last_seq), strategy=strategy, level=level,
            first_seq=first_seq, last_seq=last_seq, first_turn=first_turn, last_turn=last_turn, summary=summary,
            input_tokens=input_tokens, output_tokens=estimate_tokens(summary), covered_tokens=covered,
            target_tokens=target, children=tuple(children), messages=messages, trigger=trigger,
            dropped_count=len(dropped), dropped=tuple(dropped), preserved_entities=tuple(entities), llm=tuple(llm),
        )


def _carried(text: str, words: set[str]) -> float:
    mine = set(_WORD.findall(text.lower()))
    return len(mine & words) / len(mine) if mine else 1.0

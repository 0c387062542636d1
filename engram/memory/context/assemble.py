"""The context that would be sent to the model now: its blocks, their order and their budgets.

From the most stable to the most recent (a stable prefix is what prompt caches reuse):

1. **working memory** — the agent's `working-memory.md` (slots in focus, persistent notes, key
   memories), at most 5% of the window (the guide's budget for it);
2. **rolling summary** — the discussion memory's rolling summary (`<id>_summary.jsonl`), when a
   workflow made one;
3. **compaction chain** — the summaries that stand for the compacted turns, oldest first, each
   labelled `[L1: turns 1-120]`;
4. **recalled memories** — the agent's traces recalled for the latest user message, best first, less
   those made only from turns that are still raw in this context (they are there verbatim);
5. **recent turns** — every turn after the chain, raw (the last `preserveRecentTurns` are never
   compacted; more stay raw until the threshold is passed again).

Budgets (fractions of `contextWindowTokens`): the conversation (chain + recent turns) is what
compaction keeps under `compactionThreshold` (75%); working memory takes at most 5%; the rolling
summary and recalled memories together at most MEMORY_SHARE (10%): the rolling summary at most half of
it, then whole traces, best first, in what is left. That leaves at least 10% for the reply. Blocks over their budget are
cut (working memory, rolling summary) or shortened (fewer traces); the conversation is shown as it is
(compaction, not this view, keeps it in bounds).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from engram.config import defaults as d
from engram.kernel.tokens import CHARS_PER_TOKEN, estimate_tokens

# Rolling summary + recalled memories, as a share of the context window; the rolling summary takes at most
# SUMMARY_SHARE of it, the recalled traces the rest.
MEMORY_SHARE = 0.10
SUMMARY_SHARE = 0.5


@dataclass(frozen=True)
class ChainEntry:
    label: str
    summary: str
    tokens: int


@dataclass(frozen=True)
class RawTurn:
    turn: int
    seq: int
    role: str
    name: str | None
    content: str
    ts: str = ""
    ts_us: int = 0

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.content)

    @property
    def speaker(self) -> str:
        return f"{self.role} ({self.name})" if self.name else self.role


@dataclass(frozen=True)
class Recalled:
    score: float
    content: str
    trace_id: str = ""
    source_seqs: tuple[int, ...] = ()


@dataclass
class Block:
    name: str
    title: str
    text: str
    budget: int | None = None  # tokens; None: not cut by this view
    note: str = ""

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)


@dataclass
class AssembledContext:
    agent: str
    discussion: str
    window_tokens: int
    threshold_tokens: int
    blocks: list[Block] = field(default_factory=list)
    turns: list[RawTurn] = field(default_factory=list)
    query: str = ""

    @property
    def conversation_tokens(self) -> int:
        return self.block("chain").tokens + sum(t.tokens for t in self.turns)

    @property
    def tokens(self) -> int:
        return sum(b.tokens for b in self.blocks) + sum(t.tokens for t in self.turns)

    def block(self, name: str) -> Block:
        return next(b for b in self.blocks if b.name == name)

    def memory_passages(self) -> list[str]:
        """What memory brings to a reply besides the turns: recalled traces, then the chain, then the rolling summary."""
        out = [line[2:] for line in self.block("recalled").text.splitlines() if line.startswith("- ")]
        out += [t for t in (self.block("chain").text, self.block("rolling_summary").text) if t.strip()]
        return out

    def render(self) -> str:
        w = self.window_tokens
        def pct(n: int) -> str:
            return f"{100 * n / w:.0f}%" if w else "-"

        first = self.turns[0].turn if self.turns else None
        lines = [
            f"context of discussion {self.discussion} (agent {self.agent}): {self.tokens:,} tokens, "
            f"{pct(self.tokens)} of a {w:,}-token window",
        ]
        for b in self.blocks:
            budget = f" / {b.budget:,} budget" if b.budget is not None else ""
            lines.append(f"  {b.title:<20} {b.tokens:>7,} tokens{budget}{'  ' + b.note if b.note else ''}")
        recent = sum(t.tokens for t in self.turns)
        span = f"turns {first}-{self.turns[-1].turn}" if self.turns else "none"
        lines.append(f"  {'recent turns':<20} {recent:>7,} tokens  ({len(self.turns)} raw: {span})")
        lines.append(
            f"conversation (chain + recent turns): {self.conversation_tokens:,} tokens; compaction threshold "
            f"{self.threshold_tokens:,} ({pct(self.threshold_tokens)} of the window)"
        )
        for b in self.blocks:
            if b.text.strip():
                lines += ["", f"--- {b.title} ---", b.text.rstrip()]
        lines += ["", f"--- recent turns ({span}) ---"]
        lines += [f"[{t.turn}] {t.speaker}: {t.content}" for t in self.turns]
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent, "discussion": self.discussion, "window_tokens": self.window_tokens,
            "threshold_tokens": self.threshold_tokens, "tokens": self.tokens,
            "conversation_tokens": self.conversation_tokens, "query": self.query,
            "blocks": [{"name": b.name, "title": b.title, "tokens": b.tokens, "budget": b.budget, "note": b.note,
                        "text": b.text} for b in self.blocks],
            "turns": [{"turn": t.turn, "seq": t.seq, "role": t.role, "name": t.name, "content": t.content, "ts": t.ts}
                      for t in self.turns],
        }


def clip_to(text: str, budget_tokens: int) -> str:
    """`text` cut at a line or word boundary to fit `budget_tokens` (marked with an ellipsis)."""
    if estimate_tokens(text) <= budget_tokens:
        return text
    limit = max(0, budget_tokens * CHARS_PER_TOKEN - 1)
    cut = text[:limit]
    for sep in ("\n", " "):
        at = cut.rfind(sep)
        if at > limit // 2:
            cut = cut[:at]
            break
    return cut.rstrip() + "…"


def assemble(
    *,
    agent: str,
    discussion: str,
    window_tokens: int,
    threshold_tokens: int,
    working_memory: str = "",
    rolling_summary: str = "",
    chain: Sequence[ChainEntry] = (),
    recalled: Sequence[Recalled] = (),
    turns: Sequence[RawTurn] = (),
    query: str = "",
    skip_raw: bool = True,
) -> AssembledContext:
    """`skip_raw`: leave out recalled traces made only from turns still raw here (False: keep them, e.g. for
    the offline responder, which quotes memory passages and never reads the turns)."""
    wm_budget = math.floor(window_tokens * d.WORKING_MEMORY_FILE_BUDGET)
    memory_budget = math.floor(window_tokens * MEMORY_SHARE)
    wm = clip_to(working_memory.strip(), wm_budget)
    summary = clip_to(rolling_summary.strip(), math.floor(memory_budget * SUMMARY_SHARE))
    left = memory_budget - estimate_tokens(summary)
    raw_seqs = {t.seq for t in turns}
    if skip_raw:
        recalled = [r for r in recalled if not (r.source_seqs and set(r.source_seqs) <= raw_seqs)]
    kept: list[str] = []
    for r in recalled:  # best first; one too long for what is left gives way to shorter ones
        line = f"- {r.content.strip()}"
        if estimate_tokens("\n".join(kept + [line])) <= left:
            kept.append(line)
    chain_text = "\n".join(f"{c.label} {c.summary.strip()}" for c in chain)
    covered = f"({len(chain)} node{'s' if len(chain) != 1 else ''})" if chain else "(nothing compacted yet)"
    recall_note = f'({len(kept)} of {len(recalled)} traces for "{query[:60]}")' if query else "(no recall)"
    blocks = [
        Block("working_memory", "working memory", wm, wm_budget),
        Block("rolling_summary", "rolling summary", summary, memory_budget, "(shares its budget with recalled memories)"),
        Block("chain", "compaction chain", chain_text, None, covered),
        Block("recalled", "recalled memories", "\n".join(kept), memory_budget, recall_note),
    ]
    return AssembledContext(
        agent=agent, discussion=discussion, window_tokens=window_tokens, threshold_tokens=threshold_tokens,
        blocks=blocks, turns=list(turns), query=query,
    )

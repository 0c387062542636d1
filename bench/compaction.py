"""Infinite-context compaction on LoCoMo dev, per strategy (offline provider); prints one JSON object.

Each LoCoMo dev conversation (12–25K tokens, 369–663 turns) goes message by message through the
ContextCompactor's decisions (`engram.memory.context.simulate`: the policy's rules and compactor, no log) with
`contextWindowTokens` = 8,000 — LoCoMo conversations never reach 75% of the default 200,000-token window,
so the window is lowered to make compaction happen (threshold 6,000 tokens; every other setting is the
default: sliding/hierarchical/hybrid, 20 preserved turns, maxSummaryChainTokens 2,000, ratio 8).

Per strategy (all conversations together, and per conversation):
- `chain_compression_ratio`: raw tokens the compaction chain stands for / the chain's tokens at the end;
- `per_compaction_ratio`: mean input/output tokens of the nodes made from raw turns (targetCompressionRatio 8);
- `context_ratio`: the whole conversation's tokens / what the conversation takes in the context at the end;
- compactions, merges (chain over maxSummaryChainTokens), highest level, traces created (hybrid), LLM calls;
- compaction time: per compaction (p50, max; all the nodes and memory-task calls of one trigger) and total.
`window_sweep` gives the chain ratio at other windows.

    .venv/bin/python bench/compaction.py [LOCOMO_JSON] [--window N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engram.config.agent import AgentConfig  # noqa: E402
from engram.memory.context.simulate import simulate  # noqa: E402
from engram.memory.ingest.formats import parse_file  # noqa: E402
from engram.providers.llm.offline.provider import OfflineTasks  # noqa: E402
from engram.providers.llm.types import ChatLine  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo-dev.json"
STRATEGIES = ("sliding", "hierarchical", "hybrid")
WINDOW = 8_000
SWEEP = (4_000, 16_000)


class CountedTasks(OfflineTasks):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def run(self, task_input):
        self.calls += 1
        return super().run(task_input)


def conversations(path: Path) -> list[tuple[str, list[ChatLine]]]:
    out = []
    for conv in parse_file(path, now_us=0):
        lines = [
            ChatLine(role=m.role, content=m.content, seq=i + 1, ts_us=m.ts_us, message_id=m.message_id or "", name=m.name)
            for i, m in enumerate(conv.messages)
        ]
        out.append((conv.discussion, lines))
    return out


def run(convs, strategy: str, window: int) -> dict:
    cfg = AgentConfig.model_validate({"memory": {"infiniteContext": {"strategy": strategy, "contextWindowTokens": window}}})
    per, seconds = [], []
    totals = dict(raw=0, covered=0, chain=0, context=0, calls=0, compactions=0, merges=0, traces=0)
    leaf_ratios, max_level = [], 0
    for name, lines in convs:
        tasks = CountedTasks()
        started = time.perf_counter()
        sim = simulate(lines, cfg, tasks, discussion=name)
        elapsed = time.perf_counter() - started
        events = [ev for _, ev in sim.events]
        leaves = [ev for ev in events if ev.trigger == "threshold"]
        merges = [ev for ev in events if ev.trigger == "chain"]
        leaf_ratios += [ev.input_tokens / ev.output_tokens for ev in leaves if ev.output_tokens]
        max_level = max([max_level] + [ev.level for ev in events])
        seconds += sim.compaction_seconds
        c = sim.context
        totals["raw"] += sim.raw_tokens
        totals["covered"] += c.covered_tokens
        totals["chain"] += c.chain_tokens
        totals["context"] += c.context_tokens
        totals["calls"] += tasks.calls
        totals["compactions"] += len(leaves)
        totals["merges"] += len(merges)
        totals["traces"] += len(sim.traces)
        per.append({
            "conversation": name, "turns": len(lines), "tokens": sim.raw_tokens, "compactions": len(leaves),
            "merges": len(merges), "chain": [n.label for n in c.chain], "chain_tokens": c.chain_tokens,
            "covered_tokens": c.covered_tokens, "chain_compression_ratio": sim.compression_ratio,
            "context_tokens_at_end": c.context_tokens, "context_ratio": sim.context_ratio,
            "traces_created": len(sim.traces), "llm_calls": tasks.calls, "seconds": round(elapsed, 3),
        })
    return {
        "chain_compression_ratio": round(totals["covered"] / totals["chain"], 2) if totals["chain"] else 0.0,
        "per_compaction_ratio": round(statistics.mean(leaf_ratios), 2) if leaf_ratios else 0.0,
        "context_ratio": round(totals["raw"] / totals["context"], 2) if totals["context"] else 0.0,
        "compactions": totals["compactions"],
        "merges": totals["merges"],
        "max_level": max_level,
        "chain_tokens": totals["chain"],
        "covered_tokens": totals["covered"],
        "traces_created": totals["traces"],
        "llm_calls": totals["calls"],
        "compaction_ms_p50": round(1000 * statistics.median(seconds), 2) if seconds else None,
        "compaction_ms_max": round(1000 * max(seconds), 2) if seconds else None,
        "compaction_seconds_total": round(sum(seconds), 3),
        "per_conversation": per,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--window", type=int, default=WINDOW)
    args = parser.parse_args(argv)
    convs = conversations(Path(args.data))
    report = {
        "benchmark": "infinite-context compaction per strategy on LoCoMo dev (offline provider, pure core)",
        "data": args.data,
        "conversations": len(convs),
        "turns": sum(len(lines) for _, lines in convs),
        "context_window_tokens": args.window,
        "window_note": f"LoCoMo conversations (12-25K tokens) never pass 75% of the default 200,000-token window; "
                       f"the window is lowered to {args.window:,} (threshold {int(args.window * 0.75):,}) so that "
                       "compaction happens. Other settings: defaults (20 preserved turns, maxSummaryChainTokens 2,000, "
                       "targetCompressionRatio 8, transparency full).",
        "provider": OfflineTasks().describe(),
        "cpus": os.cpu_count(),
        "strategies": {s: run(convs, s, args.window) for s in STRATEGIES},
        "window_sweep": {
            str(w): {s: run(convs, s, w)["chain_compression_ratio"] for s in STRATEGIES} for w in SWEEP
        },
    }
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
